// The scheduler's queues at one step, drawn as three labelled lanes of request chips (waiting, running, finished),
// and the Gantt's colour scale and highlight: shared by the batching and serving-load step timelines. The lanes
// come from queue-steps.js; drawing them only swaps a few chips, so it keeps up with a scrubber.
import { el } from "../calculators/ui.js";
import { CELL } from "./queue-steps.js";

const STYLE_ID = "ilab-queues-style";
const CSS = `
.ilab-queues { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: .5rem; margin: .4rem 0 .8rem; }
.ilab-queues__lane { border: 1px solid #d0d7de; border-radius: 6px; padding: .35rem .5rem; min-height: 3.2rem; min-width: 0; }
.ilab-queues__lane h4 { margin: 0 0 .3rem; font-size: .85rem; font-weight: 600; }
.ilab-queues__chips { display: flex; flex-wrap: wrap; gap: .25rem; list-style: none; margin: 0; padding: 0; }
.ilab-chip { display: inline-block; padding: .1rem .45rem; border-radius: 999px; font-size: .8rem; border: 1px solid transparent; background: #e5e7eb; color: #111; }
.ilab-chip[data-phase=prefill] { background: #f59e0b; }
.ilab-chip[data-phase=decode] { background: #2563eb; color: #fff; }
.ilab-chip[data-held] { background: #fca5a5; }
.ilab-chip[data-joined] { outline: 2px solid #111; outline-offset: 1px; }
.ilab-chip[data-finishes]::after { content: " ✓"; }
@media (max-width: 520px) { .ilab-queues { grid-template-columns: 1fr; } }
`;

// Cell code → colour, as a Plotly colorscale over zmin 0 … zmax 4 (white: not arrived, or done).
export const GANTT_COLORS = [[0, "#ffffff"], [0.2, "#ffffff"], [0.2, "#d1d5db"], [0.4, "#d1d5db"], [0.4, "#f59e0b"], [0.6, "#f59e0b"],
  [0.6, "#2563eb"], [0.8, "#2563eb"], [0.8, "#fca5a5"], [1, "#fca5a5"]];
export const CELL_NAMES = Object.fromEntries(Object.entries(CELL).map(([name, v]) => [v, { none: "", held: "done, slot held" }[name] ?? name]));

/** The shapes that turn a whole Gantt panel (columns 0 … `last`) into the picture of step `x`: an outline around
 * its column and a white cover over the columns after it, so the panel reads as drawn up to that step. Scrubbing
 * then moves two shapes instead of redrawing the heatmap (smooth over the longest runs). `x` below 0 covers the
 * whole panel (a run the timeline has not reached); `x` past `last` covers nothing. */
export function stepShapes(x, last, xref = "x", yref = "y") {
  const shapes = [];
  if (x < last) {
    shapes.push({ type: "rect", xref, yref: `${yref} domain`, x0: x + 0.5, x1: last + 0.5, y0: 0, y1: 1, layer: "above",
      line: { width: 0 }, fillcolor: "#ffffff", name: "not yet" });
  }
  if (x >= 0 && x <= last) {
    shapes.push({ type: "rect", xref, yref: `${yref} domain`, x0: x - 0.5, x1: x + 0.5, y0: 0, y1: 1, layer: "above",
      line: { color: "#111", width: 2 }, fillcolor: "rgba(0,0,0,0)", name: "this step" });
  }
  return shapes;
}

/** Three lanes; `show(lanes, label)` draws one step's (label turns a request id into its chip's text). */
export function queueLanes(title) {
  if (!document.getElementById(STYLE_ID)) {
    const style = document.createElement("style");
    style.id = STYLE_ID;
    style.textContent = CSS;
    document.head.appendChild(style);
  }
  const lane = (name, heading) => {
    const head = el("h4", { text: heading });
    const chips = el("ul", { class: "ilab-queues__chips" });
    return { name, heading, head, chips, node: el("section", { class: "ilab-queues__lane", "data-lane": name, "aria-label": heading }, head, chips) };
  };
  const lanes = [lane("waiting", "Waiting"), lane("running", "Running (this forward pass)"), lane("finished", "Finished")];
  const node = el("div", { class: "ilab-queues", role: "group", "aria-label": title, hidden: true }, ...lanes.map((l) => l.node));

  function chip(id, label, attrs = {}) {
    return el("li", { class: "ilab-chip", "data-request": String(id), ...attrs, text: label(id) });
  }

  function show(step, label = String) {
    node.hidden = !step;
    if (!step) return;
    const { waiting, running, held, finished } = step.lanes;
    const chips = {
      waiting: waiting.map((id) => chip(id, label)),
      running: [...running.map((r) => chip(r.id, label, { "data-phase": r.phase, ...(r.joined ? { "data-joined": "" } : {}),
        ...(r.finishes ? { "data-finishes": "", title: "its last token" } : {}) })),
      ...held.map((id) => chip(id, label, { "data-held": "", title: "finished, holding its slot" }))],
      finished: finished.map((id) => chip(id, label)),
    };
    for (const l of lanes) {
      l.chips.replaceChildren(...chips[l.name]);
      // The running lane's count is the pass's, as the caption says; held slots are named apart.
      const idle = l.name === "running" && held.length ? ` + ${held.length} idle slot${held.length === 1 ? "" : "s"}` : "";
      l.head.textContent = `${l.heading}: ${l.name === "running" ? running.length : chips[l.name].length}${idle}`;
    }
  }
  return { node, show };
}
