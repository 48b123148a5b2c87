// normtrain-compare's report: unpacks the inlined Vega bundle, draws every figure, sorts the table.
// No network access: the libraries and the data are in this file. Tests read document.body.dataset.state
// ("done" or "failed") and each figure's data-state.
"use strict";

async function unpack(base64) {
  const bytes = Uint8Array.from(atob(base64.trim()), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Response(stream).text();
}

// Sets the type of the compiled Vega scale `name` (and its fixed domain, if any) in every scope of the spec: also
// each panel's own scale of that channel ("concat_2_color": a heatmap's panels each have their own colour scale).
function withScale(vg, name, log, domains) {
  const visit = (node) => {
    for (const scale of node.scales || []) {
      if (scale.name !== name && !new RegExp(`^concat_\\d+_${name}$`).test(scale.name)) continue;
      scale.type = log ? "log" : "linear";
      if (log) { delete scale.zero; scale.nice = false; }  // a nice log domain pads to whole decades
      const domain = domains[log ? "log" : "linear"];
      if (domain) { scale.domain = domain; scale.clamp = true; delete scale.domainRaw; }
    }
    for (const mark of node.marks || []) visit(mark);
  };
  visit(vg);
  return vg;
}

async function render(fig, datasets) {
  const box = document.getElementById(fig.id);
  const log = box.querySelector("input.log")?.checked ?? fig.log;  // a figure without the switch keeps its scale
  const spec = JSON.parse(JSON.stringify(fig.spec));
  spec.datasets = Object.fromEntries(fig.uses.map((name) => [name, datasets[name]]));
  spec.params = (spec.params || []).map((p) => (p.name === "logscale" ? { ...p, value: log } : p));
  if (box.view) box.view.finalize();
  box.dataset.state = "drawing";
  const result = await vegaEmbed(box.querySelector(".chart"), spec, {  // mode: vega-embed takes a "concat" for Vega
    mode: "vega-lite", actions: false, renderer: "canvas", patch: (vg) => withScale(vg, fig.scale, log, fig.domains),
  });
  box.view = result.view;
  box.dataset.state = "drawn";
}

function sortable(table) {
  const body = table.tBodies[0];
  table.querySelectorAll("th").forEach((th, col) => {
    th.addEventListener("click", () => {
      const up = th.dataset.order !== "asc";
      table.querySelectorAll("th").forEach((h) => delete h.dataset.order);
      th.dataset.order = up ? "asc" : "desc";
      const key = (row) => {
        const cell = row.cells[col];
        const v = cell.dataset.v;
        return v === undefined || v === "" ? null : isNaN(Number(v)) ? v : Number(v);
      };
      const rows = Array.from(body.rows);
      rows.sort((a, b) => {
        const x = key(a), y = key(b);
        if (x === null || y === null) return (x === null) - (y === null);  // empty cells last
        const c = typeof x === typeof y ? (x < y ? -1 : x > y ? 1 : 0) : typeof x === "number" ? -1 : 1;
        return up ? c : -c;
      });
      rows.forEach((row) => body.appendChild(row));
    });
  });
}

async function main() {
  document.querySelectorAll("table.sortable").forEach(sortable);
  const data = JSON.parse(document.getElementById("normtrain-data").textContent);
  if (!data.figures.length) { document.body.dataset.state = "done"; return; }
  if (typeof DecompressionStream === "undefined") {
    throw new Error("this browser cannot unpack the report's JavaScript (DecompressionStream); use a browser from 2023 on");
  }
  new Function(await unpack(document.getElementById("normtrain-vega").textContent))();
  for (const fig of data.figures) {
    const box = document.getElementById(fig.id);
    box.querySelector("input.log")?.addEventListener("change", () => render(fig, data.datasets));
    await render(fig, data.datasets);
  }
  document.body.dataset.state = "done";
}

main().catch((err) => {
  document.body.dataset.state = "failed";
  const note = document.getElementById("figures-state");
  note.textContent = `The figures could not be drawn: ${err.message}`;
  note.hidden = false;
  console.error(err);
});
