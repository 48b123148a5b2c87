"""The probe's PNGs, rendered by vl-convert from the report's own probe charts (normtrain.compare.probe): one
figure source. ``skip_loss.png`` is the report's layer-skip bars, ``stream.png`` its three per-block stream charts
side by side, ``norm_curves.png`` its per-norm input → output panels with the fitted γ·tanh(α·x), all drawn from
probe.json's numbers alone, as normtrain.compare.paper draws the report's charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from normtrain.compare import paper
from normtrain.compare import probe as charts
from normtrain.compare.groups import Group
from normtrain.compare.runs import Run
from normtrain.util.numbers import number


def pictures(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{file name: the static Vega-Lite spec drawn into it} for a probe result (no norms: no norm_curves.png)."""
    run = Run(Path(result["run_dir"]), {}, None, [], probe=result, label=result["label"])
    data: dict[str, list] = {}
    figures = {f.id: f for f in charts.build([Group(run.label, [run])], data)}

    def picture(fig_id: str, **size: Any) -> dict[str, Any]:
        fig = figures[fig_id]
        return {**paper.static(fig.spec, data, fig.log), "title": fig.title, **size}

    skip = picture("fig-probe-skip")
    skip["title"] = f"{skip['title']} (full model: {number(result['val_loss'], 4)})"
    stream = [picture(f"fig-probe-{key.replace('_', '-')}", width=paper.PANEL, height=220)
              for key, *_ in charts.STREAM]
    out = {"skip_loss.png": skip, "stream.png": {"hconcat": stream}}
    if "fig-probe-norms" in figures:
        out["norm_curves.png"] = picture("fig-probe-norms")
    return out


def write(result: dict[str, Any], out: Path) -> list[Path]:
    return [paper.render(spec, out / name) for name, spec in pictures(result).items()]
