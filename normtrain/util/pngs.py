"""PNG files of figures, however drawn: reduced to a palette (2-3 times smaller), without a version string, written
atomically. Compare's and the probe's PNGs come from vl-convert (normtrain.compare.paper), the reproductions' from
matplotlib (normtrain.study.plots)."""

from __future__ import annotations

import io
from pathlib import Path

from normtrain.util.atomic import write_bytes


def palette_png(data: bytes, method: int = 0) -> bytes:
    """The PNG with its colours reduced to a 256-colour palette: plots have few colours, and the files get 2-3
    times smaller. ``method``: Pillow's median cut (0) for plots; fast octree (2) keeps the exact colours of a
    screenshot's small swatches. A ``Title`` text chunk (a smoke or quick run's mark) is kept. Pillow comes with
    matplotlib; any failure keeps the original."""
    try:
        from PIL import Image, PngImagePlugin

        source = Image.open(io.BytesIO(data))
        info = PngImagePlugin.PngInfo()
        if title := getattr(source, "text", {}).get("Title"):
            info.add_text("Title", title)
        image = source.convert("RGB").quantize(colors=256, method=method, dither=0)
        out = io.BytesIO()
        image.save(out, format="PNG", optimize=True, pnginfo=info)
    except Exception:  # a smaller file is a nicety, never a reason to fail
        return data
    return out.getvalue() if out.tell() < len(data) else data


def write_png(path: Path, data: bytes, method: int = 0) -> Path:
    write_bytes(path, palette_png(data, method))
    return path
