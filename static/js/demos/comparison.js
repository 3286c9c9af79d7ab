// A comparison demo's timing, as a student can trust it on a shared worker: both settings timed in alternating
// repeats (demos/catalog/comparison.py), the median and spread per side, "within noise" when the spreads overlap,
// and beside each time the deterministic counters that explain it (tokens prefilled, bytes read, passes).
//   const cmp = comparisonBlock(); parent.append(cmp.node); cmp.reset(); cmp.onEvent(ev) for every trace event.
// A demo's chart of the timing draws what the comparison measured, never one sample: drawComparison(Plotly, block, ev)
// (bars at the medians, error bars to the spread's ends), so the chart and the verdict beside it cannot disagree.
import { BASE_LAYOUT, PLOT_CONFIG, el, fmtMs, fmtNum } from "../calculators/ui.js";
import { formatBytes } from "../units.js";

/** A counter's value as the page shows it: bytes in binary units, counts as integers. */
export function fmtCounter(name, value) {
  if (!Number.isFinite(value)) return "–";
  return /bytes/.test(name) ? formatBytes(value) : value.toLocaleString("en-US");
}

const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
const capital = (text) => text.charAt(0).toUpperCase() + text.slice(1);

/** The verdict in words, from the `comparison` event alone. */
export function verdictText(ev) {
  const [a, b] = ev.sides;
  const fast = ev.faster === a.label ? a : b;
  const slow = fast === a ? b : a;
  const parts = [];
  if (ev.within_noise) {
    parts.push(`Within noise: over ${plural(ev.repeats, "alternating repeat", "alternating repeats")} the ${ev.spread} ` +
      `ranges overlap, so this run's clock cannot tell the two settings apart. The counters still differ: they are the mechanism.`);
    if (ev.claim) parts.push(`The lesson expects “${ev.claim}” to be faster; a busy machine can hide that in a single run.`);
  } else {
    const ratio = fast.median_s > 0 ? slow.median_s / fast.median_s : NaN;
    parts.push(`“${fast.label}” was faster: median ${fmtMs(fast.median_s)} against ${fmtMs(slow.median_s)}` +
      `${Number.isFinite(ratio) ? ` (${fmtNum(ratio)}×)` : ""}, and the ${ev.spread} ranges do not overlap.`);
    if (ev.claim === ev.faster) parts.push("That is what the lesson says.");
    else if (ev.claim) parts.push(`The lesson expects “${ev.claim}” to be faster: this run disagrees; the machine's load below may say why.`);
  }
  const shared = ev.other_sequences > 0
    ? `Up to ${plural(ev.other_sequences, "sequence", "sequences")} of other runs shared its forward passes.`
    : "No other run's sequences shared its forward passes.";
  const load = ev.cpu_load_1m >= 0 ? ` Machine load (1 min): ${fmtNum(ev.cpu_load_1m)}.` : "";
  parts.push(shared + load);
  return parts.join(" ");
}

/** The comparison's table: one column per side, rows for the median, the spread and every counter. */
export function comparisonTable(ev) {
  const names = [];
  for (const s of ev.sides) for (const k of Object.keys(s.counters || {})) if (!names.includes(k)) names.push(k);
  const row = (head, cells) => el("tr", {}, el("th", { scope: "row", text: head }), ...cells.map((t) => el("td", { text: t })));
  return el("table", { class: "ilab-compare-timing" },
    el("caption", { text: `Timed in ${plural(ev.repeats, "alternating repeat", "alternating repeats")}: ${ev.metric}` }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "" }), ...ev.sides.map((s) => el("th", { scope: "col", text: s.label })))),
    el("tbody", {},
      row("Median", ev.sides.map((s) => fmtMs(s.median_s))),
      row(`Spread (${ev.spread})`, ev.sides.map((s) => `${fmtMs(s.low_s)} – ${fmtMs(s.high_s)}`)),
      ...names.map((k) => row(k, ev.sides.map((s) => fmtCounter(k, (s.counters || {})[k]))))));
}

const SIDE_COLORS = ["#2563eb", "#9ca3af"];

/** One side's time as a sentence reads it: the median and the spread behind it. */
export function sideText(ev, side) {
  return `${side.label}: median ${fmtMs(side.median_s)} (${ev.spread} ${fmtMs(side.low_s)} – ${fmtMs(side.high_s)})`;
}

/** Plotly traces for the comparison: a bar per side at its median (ms), error bars to the spread's low and high. */
export function comparisonTraces(ev) {
  return ev.sides.map((s, i) => ({
    type: "bar", name: s.label, x: [s.label], y: [s.median_s * 1000], marker: { color: SIDE_COLORS[i % SIDE_COLORS.length] },
    error_y: { type: "data", symmetric: false, array: [(s.high_s - s.median_s) * 1000],
      arrayminus: [(s.median_s - s.low_s) * 1000], color: "#111827", thickness: 1.5, width: 8 },
    customdata: [[s.low_s * 1000, s.high_s * 1000]],
    hovertemplate: `%{x}: median %{y:.1f} ms, ${ev.spread} %{customdata[0]:.1f}–%{customdata[1]:.1f} ms<extra></extra>`,
  }));
}

/** Draw the comparison into a chartBlock (ui.js): medians with their spread, the metric as the axis title. */
export function drawComparison(Plotly, block, ev) {
  block.summary.textContent = `${ev.metric}, ${plural(ev.repeats, "alternating repeat", "alternating repeats")} per side — ` +
    `${ev.sides.map((s) => sideText(ev, s)).join("; ")}.${ev.within_noise ? " The ranges overlap: within noise." : ""}`;
  if (!Plotly) return;
  Plotly.react(block.chart, comparisonTraces(ev), { ...BASE_LAYOUT, showlegend: false,
    title: { text: `${capital(ev.metric)}<br><sub>median of ${ev.repeats} alternating repeats; error bars: ${ev.spread}</sub>` },
    margin: { ...BASE_LAYOUT.margin, t: 72 }, xaxis: { title: { text: "" } },
    yaxis: { title: { text: "ms" }, rangemode: "tozero" } }, PLOT_CONFIG);
}

/** Clear a comparison chart until the timed repeats have run (a run's own streamed times are not the measure). */
export function clearComparison(Plotly, block, waiting = "Timed after the run, in alternating repeats of both settings.") {
  block.summary.textContent = waiting;
  if (Plotly) Plotly.react(block.chart, [], { ...BASE_LAYOUT, title: { text: "" } }, PLOT_CONFIG);
}

export function comparisonBlock() {
  const status = el("p", { class: "ilab-calc__summary", "aria-live": "polite" });
  const holder = el("div");
  const verdict = el("p", { class: "ilab-calc__summary", "data-comparison-verdict": "" });
  const node = el("section", { class: "ilab-compare-block", "aria-label": "Both settings timed in alternating repeats" },
    status, holder, verdict);
  let samples = 0;
  node.hidden = true;
  return {
    node,
    reset() {
      samples = 0;
      node.hidden = true;
      status.textContent = "";
      verdict.textContent = "";
      holder.replaceChildren();
    },
    onEvent(ev) {
      if (ev.type === "comparison_sample") {
        samples += 1;
        node.hidden = false;
        status.textContent = `Timing both settings in alternating repeats: ${plural(samples, "run", "runs")} done…`;
      } else if (ev.type === "comparison") {
        node.hidden = false;
        status.textContent = "";
        holder.replaceChildren(comparisonTable(ev));
        verdict.textContent = verdictText(ev);
      }
    },
  };
}
