// FlashAttention demo: the real q/k/v of one layer for your prompt, attended naively (whole N×N matrix)
// and tile by tile with an online softmax; shows they agree, which tiles a causal pass skips, and how the
// N×N matrix outgrows a tile as the sequence gets longer. A step timeline walks the tiles of one head
// (flash-steps.js): the lit tile on the grid, and that query tile's running max, running sum and output
// accumulator after it, with the caption saying what rescaled. The student picks the head (every head of the
// layer when the run carries them all, else the one the settings chose).
// Scrubbing stays smooth on a busy CPU: a step is drawn as layout shapes only (Plotly's cheap "arraydraw"
// update, precomputed paths), and the hover traces with each value follow once the scrubber rests.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, el, fmtMs, numberField, outputs, fixed } from "../calculators/ui.js";
import { bytesLogTicks, formatBytes, logTicks } from "../units.js";
import { demoShell, intIn, promptField } from "./course-demo-kit.js";
import { flashNote, showWhy, whyNote } from "./run-notes.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";
import { comparisonBlock } from "./comparison.js";
import { ACC_COLORSCALE, accPixels, flashFromEvent, flashSteps, walkHeads } from "./flash-steps.js";

// The hover traces (exact values) are redrawn this long after the last step drawn: never while scrubbing.
const SETTLE_MS = 150;
const BLUE = "#1f77b4";
const ORANGE = "#f97316";

/** The accumulator's image is a few pixels stretched over its cells: crisp cells, not a blur. The two charts a
 * step redraws are contained: their changes restyle and lay out only themselves, not the page around them. */
function pixelatedImages() {
  if (document.getElementById("ilab-flash-style")) return;
  const style = document.createElement("style");
  style.id = "ilab-flash-style";
  style.textContent = ".ilab-flash__stats image { image-rendering: pixelated; } .ilab-flash__step { contain: content; }";
  document.head.appendChild(style);
}

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/flash_attention.py), embedded in the page.
  const sp = specParams(config);
  const prompt = promptField("Prompt", sp.value("prompt"));
  const layer = numberField("Layer", sp.value("layer"), sp.range("layer", { step: 1 }));
  const head = numberField("Head", sp.value("head"), sp.range("head", { step: 1, help: "whose tile walk the timeline shows" }));
  const block = numberField("Tile size", sp.value("block_size"), sp.range("block_size", { step: 1, help: "queries and keys per tile" }));
  const out = outputs([["n", "Tokens (N)"], ["diff", "Max |tiled − naive|"], ["diffSdpa", "Max |tiled − PyTorch SDPA|"],
    ["scores", "Naive: score matrix held"], ["tile", "Tiled: largest score tile held"], ["ratio", "Ratio"],
    ["tiles", "Tiles computed / skipped"], ["times", "Time naive / tiled (CPU, medians of the repeats)"]], "Naive vs tiled attention");
  const weights = chartBlock("Bar chart: how much the last token attends to each earlier token");
  const grid = chartBlock("Grid: which query-by-key tiles a causal tiled pass computes and which it skips");
  const stats = chartBlock("Profiles and heatmap: for the lit query tile, each query's running max m and running sum l, and the first dimensions of its output accumulator, after the lit key tile");
  const headPick = el("select", { class: "ilab-flash__head", "aria-label": "Head whose tile walk the timeline shows" });
  const headNote = el("span", { class: "ilab-calc__summary" });
  const headLabel = el("label", {}, "Head shown ", headPick, " ", headNote);
  // Which tile the profiles are after, as text beside the chart: a Plotly title change would cost a relayout a step.
  const litTile = el("p", { class: "ilab-flash__lit", "aria-hidden": "true" });
  stats.figure.prepend(headLabel, litTile);
  stats.chart.classList.add("ilab-flash__stats", "ilab-flash__step");
  grid.chart.classList.add("ilab-flash__step");
  pixelatedImages();
  const curve = chartBlock("Log-log line chart: bytes of the N by N score matrix and of memory traffic against sequence length, naive against tiled");
  const why = whyNote();
  let Plotly = null;

  const cmp = comparisonBlock(); // the two settings timed in alternating repeats, counters beside
  const shell = demoShell(root, config, {
    title: "FlashAttention",
    fields: [prompt.label, layer.label, head.label, block.label],
    getParams() {
      if (!prompt.input.value.trim()) throw new Error("Enter a prompt first.");
      return { prompt: prompt.input.value, layer: intIn(layer.input, "Layer", sp.min("layer"), sp.max("layer")),
        head: intIn(head.input, "Head", sp.min("head"), sp.max("head")),
        block_size: intIn(block.input, "Tile size", sp.min("block_size"), sp.max("block_size")) };
    },
    onStart(params) {
      cmp.reset();
      // a resumed run's own settings
      fillForm({ prompt: prompt.input, layer: layer.input, head: head.input, block_size: block.input }, params);
      walkEvent = null;
      headShown = null;
      shownFrame = null;
      clearTimeout(settle);
      for (const k of ["n", "diff", "diffSdpa", "scores", "tile", "ratio", "tiles", "times"]) out.set(k, "–");
      showWhy(why, "");
    },
    onEvent(ev) {
      cmp.onEvent(ev);
      if (ev.type === "attention_compare") showCompare(ev);
      else if (ev.type === "comparison") showTiming(ev);
      else if (ev.type === "attention_memory_curve") showCurve(ev);
      else if (ev.type === "flash_tile_walk") describeWalk(ev);
    },
    steps: { fromEvent: (ev) => flashFromEvent(ev, headShown ?? undefined), draw: drawTile,
      picture: () => grid.figure.parentElement }, // the tile grid and the lit tile's profiles
  });
  shell.body.append(out.node, why, weights.figure,
    el("div", { class: "ilab-calc__charts" }, grid.figure, stats.figure, curve.figure));
  shell.body.append(cmp.node);
  let pending = null; // a step the timeline drew before the chart library had loaded
  shell.plotly.then((P) => { Plotly = P; if (pending) drawTile(pending); });

  let lastN = null;
  let lastCompare = null;
  let walkEvent = null; // the run's flash_tile_walk
  let headShown = null; // the head whose walk the timeline holds
  headLabel.hidden = true;

  /** Another head: the timeline gets that head's steps and stays at the same tile (all heads walk the same). */
  headPick.addEventListener("change", () => {
    if (!walkEvent || !shell.timeline) return;
    headShown = Number(headPick.value);
    describeWalk(walkEvent);
    const at = shell.timeline.log.index;
    shell.timeline.reset();
    for (const step of flashSteps(walkEvent, headShown)) shell.timeline.push(step);
    shell.timeline.seek(at);
  });

  // Naive and tiled timed in alternating repeats: the times and the note read their medians.
  function showTiming(ev) {
    const median = (label) => (ev.sides.find((x) => x.label === label) || {}).median_s;
    out.set("times", `${fmtMs(median("naive"))} / ${fmtMs(median("tiled"))}${ev.within_noise ? " (within noise)" : ""}`);
    // Within noise there is no difference in time to explain (NaN compares as neither faster nor slower).
    const times = ev.within_noise ? { naive_time_s: NaN, tiled_time_s: NaN } : { naive_time_s: median("naive"), tiled_time_s: median("tiled") };
    if (lastCompare) showWhy(why, flashNote({ ...lastCompare, ...times }));
  }
  function showCompare(ev) {
    lastN = ev.n_tokens;
    out.set("n", String(ev.n_tokens));
    out.set("diff", ev.max_abs_diff.toExponential(2));
    out.set("diffSdpa", ev.max_abs_diff_sdpa.toExponential(2));
    out.set("scores", `${formatBytes(ev.naive_score_bytes)} (${ev.n_heads} heads × ${ev.n_tokens}²)`);
    out.set("tile", `${formatBytes(ev.tile_bytes)} (${ev.n_heads} heads × ${Math.min(ev.block_q, ev.n_tokens)}×${Math.min(ev.block_k, ev.n_tokens)})`);
    out.set("ratio", `${fixed(ev.naive_score_bytes / ev.tile_bytes, 1)}×`);
    out.set("tiles", `${ev.tiles_computed} / ${ev.tiles_skipped}`);
    lastCompare = ev; // its own times are one measurement: the times, and the note's, wait for the repeats
    showWhy(why, flashNote({ ...ev, naive_time_s: NaN, tiled_time_s: NaN }));
    const top = ev.last_row_weights.map((w, i) => [w, i]).sort((a, b) => b[0] - a[0]).slice(0, 3);
    weights.summary.textContent = `Layer ${ev.layer}, ${ev.dtype}: the two results differ by at most ${ev.max_abs_diff.toExponential(1)} ` +
      `(rounding). The last token attends most to ${top.map(([w, i]) => `"${ev.tokens[i]}" (${fixed(100 * w, 0)}%)`).join(", ")}.`;
    const nb = Math.ceil(ev.n_tokens / ev.block_q);
    const kb = Math.ceil(ev.n_tokens / ev.block_k);
    const z = [];
    for (let i = 0; i < nb; i += 1) {
      const row = [];
      for (let j = 0; j < kb; j += 1) row.push(j * ev.block_k <= Math.min((i + 1) * ev.block_q, ev.n_tokens) - 1 ? 1 : 0);
      z.push(row);
    }
    grid.summary.textContent = `${nb} × ${kb} tiles of ${ev.block_q} queries × ${ev.block_k} keys: ${ev.tiles_computed} computed, ` +
      `${ev.tiles_skipped} skipped because every key in them comes after every query (causal mask).`;
    if (!Plotly) return;
    Plotly.react(weights.chart, [{ type: "bar", x: ev.tokens.map((t, i) => `${i}:${t}`), y: ev.last_row_weights,
      hovertemplate: "%{x}: %{y:.3f}<extra></extra>" }], { ...BASE_LAYOUT, title: { text: `Attention of the last token<br><sub>layer ${ev.layer}, mean over ${ev.n_heads} heads</sub>` },
      xaxis: { title: { text: "position:token" }, tickangle: -45, automargin: true }, yaxis: { title: { text: "weight" }, rangemode: "tozero" } }, PLOT_CONFIG);
    Plotly.react(grid.chart, [{ type: "heatmap", z, colorscale: [[0, "#eeeeee"], [1, "#1f77b4"]], showscale: false, xgap: 2, ygap: 2,
      hovertemplate: "query block %{y}, key block %{x}: %{z}<extra>1 = computed</extra>" }],
    { ...BASE_LAYOUT, title: { text: "Tiles computed and skipped<br><sub>blue: computed · grey: skipped</sub>" }, xaxis: { title: { text: "key block" }, dtick: 1 },
      yaxis: { title: { text: "query block" }, autorange: "reversed", dtick: 1 } }, PLOT_CONFIG);
  }

  function describeWalk(ev) {
    walkEvent = ev;
    const heads = walkHeads(ev);
    if (headShown === null || !heads.includes(headShown)) headShown = ev.head;
    headPick.replaceChildren(...heads.map((h) => el("option", { value: String(h), text: `head ${h}` })));
    headPick.value = String(headShown);
    headPick.disabled = heads.length < 2;
    headNote.textContent = heads.length > 1 ? `(this run carries all ${heads.length} heads of its layer)`
      : `(this run carries one head's walk, its prompt being long: set Head in the settings, ${sp.min("head")}–${sp.max("head")}, and run again for another)`;
    headLabel.hidden = false;
    const some = ev.q_blocks.length < ev.n_q_blocks;
    stats.summary.textContent = `The online softmax of head ${headShown}, tile by tile: ${ev.tiles.length} tiles of ` +
      (some ? `query tiles ${ev.q_blocks.join(", ")} (${ev.q_blocks.length} of ${ev.n_q_blocks}, evenly spaced, to keep the trace small)`
        : `all ${ev.n_q_blocks} query tiles`) + `. Move the timeline: rows in orange are those whose max rose at the lit tile, ` +
      `so their l and accumulator were scaled down by exp(m_old − m_new) first.`;
  }

  let shownFrame = null; // "head:query tile" whose axes the stats chart has now
  let settle = 0;

  /** One step of the tile walk: light its tile (and the key tiles its query tile has done) on the grid, and draw
   * that query tile's m, l and accumulator at the scale of its whole walk, as precomputed shapes: one relayout
   * per chart, no trace recalculated. The hover traces (the exact values) follow once the scrubber rests. */
  function drawTile(step) {
    if (!Plotly) { pending = step; return; }
    pending = null;
    const { qBlock: qb, kBlock: kb } = step;
    Plotly.relayout(grid.chart, { shapes: [
      { type: "rect", x0: -0.5, x1: kb - 0.5, y0: qb - 0.5, y1: qb + 0.5, fillcolor: "rgba(249, 115, 22, 0.25)", line: { width: 0 } },
      { type: "rect", x0: kb - 0.5, x1: kb + 0.5, y0: qb - 0.5, y1: qb + 0.5, fillcolor: "rgba(249, 115, 22, 0.6)",
        line: { color: "#c2410c", width: 3 } },
    ] });
    clearTimeout(settle);
    const frame = `${step.head}:${qb}`;
    if (shownFrame === null) {
      drawExact(step); // the first step: the whole figure, traces and all
      return;
    }
    litTile.textContent = litText(step);
    const update = { shapes: statShapes(step), images: [accImage(step)] };
    if (frame !== shownFrame) Object.assign(update, axisRanges(step), { "title.text": statTitle(step) }); // its own scale
    shownFrame = frame;
    stats.chart.dataset.exact = "";
    Plotly.relayout(stats.chart, update);
    settle = setTimeout(() => drawExact(step), SETTLE_MS);
  }

  const statTitle = (step) => `Query tile ${step.qBlock} of head ${step.head}<br><sub>m, l and acc after each key tile · orange: max rose, rescaled</sub>`;
  const litText = (step) => `Query tile ${step.qBlock} after key tile ${step.kBlock} (head ${step.head})`;

  function axisRanges(step) {
    const { m: [mlo, mhi], l: [, lhi] } = step.scale;
    const pad = 0.05 * (Math.max(mhi, 0) - Math.min(mlo, 0) || 1);
    return { "xaxis.range": [Math.min(mlo, 0) - pad, Math.max(mhi, 0) + pad], "xaxis2.range": [0, (lhi || 1) * 1.05],
      "xaxis3.range": [-0.5, step.walk.acc_dims - 0.5], "yaxis.range": [step.rowStart + step.m.length - 0.5, step.rowStart - 0.5] };
  }

  /** m and l as filled step profiles (flash-steps.js precomputed the paths), the rows that rescaled in orange. */
  function statShapes(step) {
    const p = step.picture;
    const path = (xref, d, fill, line) => ({ type: "path", xref, yref: "y", path: d, fillcolor: fill,
      line: line ? { color: line, width: 1 } : { width: 0 } });
    return [path("x", p.m, "rgba(31, 119, 180, 0.45)", BLUE), path("x2", p.l, "rgba(31, 119, 180, 0.45)", BLUE),
      path("x", p.mRose, ORANGE), path("x2", p.lRose, ORANGE)].filter((sh) => sh.path);
  }

  /** The accumulator as a layout image, one pixel per (query, dimension) stretched over its cells: what a Plotly
   * heatmap draws, without recalculating a trace. Made once per step, on its first draw. */
  function accImage(step) {
    if (!step.accImage) {
      const dims = step.walk.acc_dims;
      const canvas = document.createElement("canvas");
      canvas.width = dims;
      canvas.height = step.acc.length;
      canvas.getContext("2d").putImageData(new ImageData(accPixels(step.acc, step.scale.acc), dims, step.acc.length), 0, 0);
      step.accImage = canvas.toDataURL("image/png");
    }
    return { source: step.accImage, xref: "x3", yref: "y", x: -0.5, y: step.rowStart - 0.5, sizex: step.walk.acc_dims,
      sizey: step.acc.length, sizing: "stretch", xanchor: "left", yanchor: "top", layer: "below" };
  }

  /** The whole figure for `step`: its shapes and image and, as invisible traces over them, the values to hover
   * (m and l per query with the factor that rescaled them, the accumulator per cell); `data-exact` names the
   * step they belong to. */
  function drawExact(step) {
    shownFrame = `${step.head}:${step.qBlock}`;
    const dims = Array.from({ length: step.walk.acc_dims }, (_, i) => i);
    const ranges = axisRanges(step);
    // Lines of width 0: hover finds their points, and there is no marker to style per point.
    const hover = (x, axis, name) => ({ type: "scatter", mode: "lines", x, y: step.rows, xaxis: axis, yaxis: "y",
      customdata: step.rescale, line: { width: 0, color: BLUE },
      hovertemplate: `query %{y}: ${name} = %{x:.3f} (rescale factor %{customdata:.3g})<extra></extra>` });
    litTile.textContent = litText(step);
    Plotly.react(stats.chart, [
      hover(step.m, "x", "m"),
      hover(step.l, "x2", "l"),
      { type: "heatmap", z: step.acc, x: dims, y: step.rows, xaxis: "x3", yaxis: "y", zmin: -step.scale.acc,
        zmax: step.scale.acc, colorscale: ACC_COLORSCALE, showscale: false, opacity: 0,
        hovertemplate: "query %{y}, dim %{x}: %{z:.3f}<extra></extra>" },
    ], { ...BASE_LAYOUT, showlegend: false, title: { text: statTitle(step) }, shapes: statShapes(step), images: [accImage(step)],
      xaxis: { domain: [0, 0.3], range: ranges["xaxis.range"], title: { text: "max m" } },
      xaxis2: { domain: [0.36, 0.64], range: ranges["xaxis2.range"], title: { text: "sum l" } },
      xaxis3: { domain: [0.7, 1], range: ranges["xaxis3.range"], title: { text: "acc (dims)" }, dtick: 2 },
      yaxis: { title: { text: "query" }, range: ranges["yaxis.range"] } }, PLOT_CONFIG);
    stats.chart.dataset.exact = `${step.head}:${step.qBlock}:${step.kBlock}`;
  }

  function showCurve(ev) {
    const last = ev.n.length - 1;
    curve.summary.textContent = `Per head and layer in ${ev.bytes_per_value}-byte values: at ${ev.n[last].toLocaleString("en-US")} tokens the ` +
      `score matrix alone is ${formatBytes(ev.naive_score_bytes[last])} while a ${ev.block_q}×${ev.block_k} tile stays ${formatBytes(ev.tile_bytes)}; ` +
      `modelled main-memory traffic is ${formatBytes(ev.naive_traffic_bytes[last])} naive vs ${formatBytes(ev.tiled_traffic_bytes[last])} tiled.`;
    if (!Plotly) return;
    const traces = [
      { x: ev.n, y: ev.naive_score_bytes, name: "naive: N×N scores held", mode: "lines+markers", line: { color: "#d62728" } },
      { x: ev.n, y: ev.n.map(() => ev.tile_bytes), name: "tiled: one tile held", mode: "lines", line: { color: "#1f77b4" } },
      { x: ev.n, y: ev.naive_traffic_bytes, name: "naive: memory traffic", mode: "lines", line: { color: "#d62728", dash: "dot" } },
      { x: ev.n, y: ev.tiled_traffic_bytes, name: "tiled: memory traffic", mode: "lines", line: { color: "#1f77b4", dash: "dot", width: 3 } },
    ];
    const ys = traces.flatMap((t) => t.y).filter((y) => y > 0);
    const shapes = lastN ? [{ type: "line", x0: lastN, x1: lastN, yref: "paper", y0: 0, y1: 1, line: { color: "#555", dash: "dash" } }] : [];
    Plotly.react(curve.chart, traces, { ...BASE_LAYOUT, title: { text: "As the sequence grows<br><sub>one head, one layer · dashed: your prompt</sub>" }, shapes,
      xaxis: { title: { text: "sequence length N" }, type: "log", ...logTicks(Math.min(...ev.n), Math.max(...ev.n)) },
      yaxis: { title: { text: "bytes" }, type: "log", ...bytesLogTicks(Math.min(...ys), Math.max(...ys)) },
      legend: { orientation: "h", y: -0.3 } }, PLOT_CONFIG);
  }
  return shell;
}
