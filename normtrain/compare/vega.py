"""The JavaScript of the interactive report: Vega, Vega-Lite and vega-embed, inlined once, gzipped.

The libraries come from the ``vl-convert-python`` package, which ships them (and bundles them into one
script with no imports and no network access); nothing is fetched from a CDN, so a report opens offline
and from a mail attachment. The 0.9 MB script is stored gzipped and base64-encoded (0.4 MB) and unpacked
by the browser (``DecompressionStream``, in every browser since 2023), which keeps a committed report
well below 2 MB. Vega, Vega-Lite and vega-embed are BSD-3-Clause licensed; their notices are in the page.
"""

from __future__ import annotations

import base64
import functools
import gzip


class VegaUnavailable(RuntimeError):
    """vl-convert-python is not installed: no interactive figures."""


@functools.lru_cache(maxsize=1)
def bundle() -> tuple[str, str]:
    """(the base64 of the gzipped script, a line naming the versions). Bundling takes about a second."""
    try:
        import vl_convert
    except ImportError as err:
        raise VegaUnavailable("the interactive report needs the vl-convert-python package, which ships its "
                              "JavaScript (pip install vl-convert-python)") from err
    script = vl_convert.javascript_bundle()
    packed = base64.b64encode(gzip.compress(script.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")
    versions = (f"Vega {vl_convert.get_vega_version()}, Vega-Lite {vl_convert.get_vegalite_versions()[-1]}, "
                f"vega-embed {vl_convert.get_vega_embed_version()} (BSD-3-Clause, from vl-convert-python "
                f"{_version('vl-convert-python')})")
    return packed, versions


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "?"
