// Quantization, live: a step timeline walking the layer's blocks (a block = the weights sharing one scale): each
// step draws that block's weights before and after rounding on its own level grid, and where it sits among all
// blocks' errors (outlier-driven blocks in red). Then the layer's weight histogram before and after, with the
// format's grid overlaid, and an error heatmap,
// the activation outliers of the student's prompt, fp32 vs quantized generation token by token (divergences
// marked), and bytes vs perplexity vs tokens/s for every format from the recorded quantize-report table.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, el, numberField, outputs, selectField, fixed } from "../calculators/ui.js";
import { demoShell, intIn, promptField } from "./course-demo-kit.js";
import { fillForm } from "./restore-form.js";
import { quantNote, showWhy, whyNote } from "./run-notes.js";
import { specParams } from "./spec-params.js";
import { comparisonBlock } from "./comparison.js";
import { formatBytes, logTicks } from "../units.js";

// How the page names the spec's choices (the choices themselves, and their order, come from the spec).
const FORMAT_NAMES = { int8: "int8 per-channel (weight-only)", w8a8: "int8 weights × int8 activations (FBGEMM)",
  "int4-g32": "int4, groups of 32", "int4-g128": "int4, groups of 128", nf4: "NF4, blocks of 64",
  fp8: "FP8 e4m3, per-channel", "llm-int8": "LLM.int8() with fp32 outliers" };
const PROJECTION_NAMES = { w_down: "MLP down (w_down)", w_gate_up: "MLP gate+up", wqkv: "attention QKV", wo: "attention output" };
const MiB = 1024 * 1024;
// One colour per format in the trade-off scatter (its legend names them: labels on the points would overlap).
const FORMAT_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#d62728"];

const exp = (x) => (typeof x === "number" && Number.isFinite(x) ? x.toExponential(2) : "–");
const signed = (x) => (x >= 0 ? `+${fixed(x, 3)}` : `−${fixed(-x, 3)}`);

/** The caption of one walked block: where it is, its scale, its max error and whether an outlier set the scale. */
export function blockCaption(ev, b, i) {
  const times = fixed(b.absmax / ev.weight_rms, 1);
  const why = b.outlier ? `an outlier set the scale: w = ${signed(b.top_value)}, ${times}× the layer's RMS`
    : `no outlier set it: its largest weight, ${signed(b.top_value)}, is ${times}× the layer's RMS`;
  return `Block ${i + 1} of ${ev.walk.length} (row ${b.row}, inputs ${b.start}–${b.end - 1}): scale ${exp(b.scale)}, ` +
    `max error ${exp(b.max_error)}; ${why}.`;
}

/** Vertical segments at items[k][0] from y0(item) to y1(item), as one polyline broken by nulls. */
function stems(items, y0, y1) {
  const x = [], y = [];
  for (const it of items) { x.push(it[0], it[0], null); y.push(y0(it), y1(it), null); }
  return { x, y };
}

/** One timeline step per block a `quant_blocks` event walks (null for every other event). The block picture is
 * in level units (weight ÷ the block's scale): the level grid and the axes are the same at every step, so a step
 * moves only data (cheap to scrub), and what changes is how the block's weights spread over the levels: an outlier
 * stretches the scale and crowds the rest onto the few levels near zero. Each step holds, precomputed: the
 * block's histogram, the levels its weights landed on with their counts, and the arrays every step shares. */
export function quantBlockSteps(ev) {
  if (!ev || ev.type !== "quant_blocks") return null;
  const isOutlier = ev.sample_absmax.map((a) => a > ev.outlier_factor * ev.weight_rms);
  const sample = { x: ev.sample_absmax, y: ev.sample_max_error, color: isOutlier.map((o) => (o ? "#d62728" : "#7f7f7f")) };
  const walked = { x: ev.walk.map((b) => b.absmax), y: ev.walk.map((b) => b.max_error) };
  const reach = Math.max(...ev.levels.map(Math.abs));
  const top = Math.max(1, ...ev.walk.flatMap((b) => [...b.hist_counts, ...b.level_counts]));
  // Drawn as one path each (segments split by nulls): int8's 255 levels would otherwise be 255 SVG shapes.
  const ticks = stems(ev.levels.map((v) => [v]), () => top * 1.02, () => top * 1.1);
  return ev.walk.map((b, i) => {
    const width = (2 * b.absmax) / ev.bins / b.scale;
    const centers = b.hist_counts.map((_, j) => -b.absmax / b.scale + (j + 0.5) * width);
    const used = ev.levels.map((v, j) => [v, b.level_counts[j]]).filter(([, c]) => c > 0);
    return {
      caption: blockCaption(ev, b, i), block: b, index: i, format: ev.format, group: ev.group,
      before: { x: centers, y: b.hist_counts }, after: used, stems: stems(used, () => 0, (u) => u[1]),
      outlierAt: b.top_value / b.scale, ticks, reach, top, sample, walked, nOutlierBlocks: ev.n_outlier_blocks, nBlocks: ev.n_blocks,
    };
  });
}

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/quantization.py), embedded in the page.
  const sp = specParams(config);
  const prompt = promptField("Prompt", sp.value("prompt"));
  const format = selectField("Format", sp.choices("format", FORMAT_NAMES), sp.value("format"));
  const layer = numberField(`Layer (${sp.min("layer")}–${sp.max("layer")})`, sp.value("layer"), sp.range("layer", { step: 1 }));
  const proj = selectField("Projection", sp.choices("projection", PROJECTION_NAMES), sp.value("projection"));
  const newTokens = numberField("New tokens", sp.value("max_new_tokens"), sp.range("max_new_tokens", { step: 1 }));

  const layerOut = outputs([["kernel", "Kernel at batch 1"], ["bytes", "Bytes: fp32 → quantized"], ["rmse", "Weight error (RMS, relative)"],
    ["maxerr", "Largest weight error"]], "The chosen layer");
  const blockPic = chartBlock("Histogram of one block's weights before quantization and the levels they were rounded to, with the block's level grid");
  const blockErr = chartBlock("Scatter chart: each block's largest weight against its largest quantization error; outlier blocks in red, the current block ringed");
  const hist = chartBlock("Histogram of the layer's weights before and after quantization with the format's representable values overlaid");
  const heat = chartBlock("Heatmap of absolute quantization error for the top-left 48 by 48 weights");
  const outl = chartBlock("Bar chart: activation channels above the outlier threshold in each layer");
  const textFp = el("p", { class: "ilab-calc__text", role: "log", "aria-live": "polite", "aria-label": "fp32 generation" });
  const textQ = el("p", { class: "ilab-calc__text", role: "log", "aria-live": "polite", "aria-label": "Quantized generation" });
  const qLabel = el("strong", { text: "quantized" });
  const runOut = outputs([["agree", "Same token as fp32"], ["first", "First divergence"], ["speed", "Decode tokens/s: fp32 / quantized (this run, each from its own median step)"],
    ["stream", "Bytes streamed per token: fp32 → quantized"]], "Side-by-side generation");
  const trade = chartBlock("Scatter chart: weight bytes against perplexity for each format, marker size shows decode speed");
  const tradeTable = el("table", { class: "ilab-calc__table" });
  const why = whyNote();
  let Plotly = null;
  let state = null;
  let errDrawn = null; // the sample the error scatter shows (a new run's steps bring a new one)
  let picDrawn = null; // … and the block picture's run

  const cmp = comparisonBlock(); // the two settings timed in alternating repeats, counters beside
  const shell = demoShell(root, config, {
    title: "Quantization",
    fields: [prompt.label, format.label, layer.label, proj.label, newTokens.label],
    getParams() {
      if (!prompt.input.value.trim()) throw new Error("Enter a prompt first.");
      return { prompt: prompt.input.value, format: format.input.value, layer: intIn(layer.input, "Layer", sp.min("layer"), sp.max("layer")),
        projection: proj.input.value,
        max_new_tokens: intIn(newTokens.input, "New tokens", sp.min("max_new_tokens"), sp.max("max_new_tokens")) };
    },
    onStart(params) {
      cmp.reset();
      fillForm({ prompt: prompt.input, format: format.input, layer: layer.input, projection: proj.input,
        max_new_tokens: newTokens.input }, params); // a resumed run's own settings
      showWhy(why, "");
      state = { fmt: params.format };
      qLabel.textContent = params.format;
      textFp.replaceChildren(el("strong", { text: "fp32: " }));
      textQ.replaceChildren(qLabel, ": ");
      for (const k of ["kernel", "bytes", "rmse", "maxerr"]) layerOut.set(k, "–");
      for (const k of ["agree", "first", "speed", "stream"]) runOut.set(k, "–");
      for (const b of [blockPic, blockErr, hist, heat, outl, trade]) b.summary.textContent = "";
    },
    onEvent(ev) {
      cmp.onEvent(ev);
      if (ev.type === "quant_layer") showLayer(ev);
      else if (ev.type === "quant_outliers") showOutliers(ev);
      else if (ev.type === "quant_token") showToken(ev);
      else if (ev.type === "quant_summary") showSummary(ev);
      else if (ev.type === "quant_formats") showFormats(ev);
    },
    steps: { fromEvent: quantBlockSteps, draw: drawBlock, picture: () => blockPic.figure.parentElement },
  });
  shell.body.append(
    layerOut.node, el("h4", { text: "Block by block: step through the timeline below" }),
    el("div", { class: "ilab-calc__charts" }, blockPic.figure, blockErr.figure),
    el("div", { class: "ilab-calc__charts" }, hist.figure, heat.figure), outl.figure,
    el("h4", { text: "The same prompt, greedy, fp32 vs quantized (underlined: a different token)" }), textFp, textQ, runOut.node, why,
    el("h4", { text: "All formats: bytes, quality and speed (recorded by quantize-report)" }), trade.figure, tradeTable,
  );
  shell.body.append(cmp.node);
  shell.plotly.then((P) => { Plotly = P; });

  /** One walked block (a timeline step): its weights before (bars over ±its absmax), the levels they were rounded
   * to after (orange, counts), its level grid (red ticks), its largest weight (a red diamond when an outlier);
   * and the block among all blocks' errors. Plotly.react on the same arrays: cheap enough to scrub. */
  function drawBlock(step) {
    const b = step.block;
    blockPic.summary.textContent = `Row ${b.row}, inputs ${b.start}–${b.end - 1}: scale ${exp(b.scale)}, max error ${exp(b.max_error)}. ` +
      `Blue: its weights before; orange stems: how many landed on each level after; red ticks: the levels; ` +
      `diamond: its largest weight (red: an outlier). ` +
      `Rounding moves each weight to the nearest red level (at most half a level's spacing × the scale). The largest weight sets the scale: ` +
      `an outlier crowds the others onto the few levels near zero.`;
    blockErr.summary.textContent = `${step.nOutlierBlocks} of ${step.nBlocks} blocks hold an outlier weight (red): ` +
      `their whole block is rounded on a coarse grid. Ringed: this step's block.`;
    if (!Plotly) return;
    const outlier = { x: [step.outlierAt], y: [step.top * 0.5], name: b.outlier ? "outlier (set the scale)" : "largest |w|",
      marker: { symbol: "diamond", size: 12, color: b.outlier ? "#d62728" : "#444" } };
    if (picDrawn === step.sample && blockPic.chart.data) {
      // The same run: the axes and the grid stay, the block's data moves without a full redraw.
      Plotly.animate(blockPic.chart, { data: [step.before, { x: step.stems.x, y: step.stems.y }, outlier], traces: [0, 1, 3] },
        { mode: "immediate", transition: { duration: 0 }, frame: { duration: 0, redraw: false } });
    } else {
      picDrawn = step.sample;
      drawBlockPicture(step, outlier);
    }
    drawErrors(step);
  }

  function drawBlockPicture(step, outlier) {
    Plotly.react(blockPic.chart, [
      { type: "scatter", mode: "lines", ...step.before, name: "before (fp32)", line: { shape: "hvh", color: "#1f77b4", width: 1 },
        fill: "tozeroy", fillcolor: "rgba(31, 119, 180, 0.35)", hovertemplate: "%{x:.2f} × scale: %{y} weights<extra>before</extra>" },
      { type: "scatter", mode: "lines", x: step.stems.x, y: step.stems.y, name: "after (on a level)", line: { color: "#ff7f0e", width: 3 },
        hovertemplate: "level %{x:.3g}: %{y} weights<extra>after</extra>" },
      { type: "scatter", mode: "lines", x: step.ticks.x, y: step.ticks.y, name: "level grid", line: { color: "#d62728", width: 1 }, hoverinfo: "skip" },
      { type: "scatter", mode: "markers", ...outlier, hovertemplate: "largest |w| ÷ scale: %{x:.2f}<extra></extra>" },
    ], { ...BASE_LAYOUT, title: { text: `One block, before and after<br><sub>${step.format}: ${step.group} weights share a scale</sub>` },
      xaxis: { title: { text: "weight ÷ block scale" }, range: [-step.reach * 1.1, step.reach * 1.1] },
      yaxis: { title: { text: "weights" }, range: [0, step.top * 1.15] }, showlegend: false }, PLOT_CONFIG);
  }

  function drawErrors(step) {
    const b = step.block;
    // The ring round this step's block is a shape (a fixed size in pixels): moving it redraws no trace.
    const ring = [{ type: "circle", xref: "x", yref: "y", xsizemode: "pixel", ysizemode: "pixel", xanchor: b.absmax, yanchor: b.max_error,
      x0: -9, x1: 9, y0: -9, y1: 9, line: { color: "#000", width: 3 } }];
    if (errDrawn === step.sample) { // the same run: only the ring moves
      Plotly.relayout(blockErr.chart, { shapes: ring });
      return;
    }
    errDrawn = step.sample;
    Plotly.react(blockErr.chart, [
      { type: "scatter", mode: "markers", x: step.sample.x, y: step.sample.y, name: "blocks (a sample)", marker: { size: 5, color: step.sample.color, opacity: 0.6 },
        hovertemplate: "largest |w| %{x:.3f}, max error %{y:.2e}<extra></extra>" },
      { type: "scatter", mode: "markers", x: step.walked.x, y: step.walked.y, name: "walked blocks", marker: { size: 8, symbol: "circle-open", color: "#1f77b4" },
        hoverinfo: "skip" },
    ], { ...BASE_LAYOUT, shapes: ring, title: { text: `Error per block<br><sub>red: an outlier set the block's scale</sub>` },
      xaxis: { title: { text: "block's largest |w|" } }, yaxis: { title: { text: "block's max error" } }, showlegend: false }, PLOT_CONFIG);
  }

  function showLayer(ev) {
    layerOut.set("kernel", ev.kernel);
    layerOut.set("bytes", `${formatBytes(ev.fp32_bytes)} → ${formatBytes(ev.quant_bytes)} (${fixed(ev.fp32_bytes / ev.quant_bytes, 1)}× smaller)`);
    layerOut.set("rmse", `${ev.rmse.toExponential(2)} (${fixed(ev.rel_rmse * 100, 2)} % of the weights' RMS)`);
    layerOut.set("maxerr", ev.max_abs_error.toExponential(2));
    const centers = ev.hist_counts.map((_, i) => (ev.hist_edges[i] + ev.hist_edges[i + 1]) / 2);
    const lo = ev.hist_edges[0], hi = ev.hist_edges[ev.hist_edges.length - 1];
    const grid = ev.grid.filter((g) => g >= lo && g <= hi);
    const top = Math.max(...ev.hist_counts, ...(ev.dequant_hist_counts || []));
    if (Plotly) {
      Plotly.react(hist.chart, [
        { type: "bar", x: centers, y: ev.hist_counts, name: "before", marker: { color: "#1f77b4", opacity: 0.6 }, hovertemplate: "%{x:.4f}: %{y}<extra>before</extra>" },
        ...(ev.dequant_hist_counts ? [{ type: "bar", x: centers, y: ev.dequant_hist_counts, name: "after", marker: { color: "#ff7f0e", opacity: 0.6 },
          hovertemplate: "%{x:.4f}: %{y}<extra>after</extra>" }] : []),
        { type: "scatter", mode: "markers", x: grid, y: grid.map(() => top * 1.03), name: `${ev.format} levels`, marker: { symbol: "line-ns-open", size: 14, color: "#d62728" },
          hovertemplate: "level %{x:.4f}<extra></extra>" },
      ], { ...BASE_LAYOUT, title: { text: `Layer ${ev.layer} ${ev.projection} [${ev.shape.join("×")}]` }, bargap: 0, barmode: "overlay",
        xaxis: { title: { text: "weight value" } }, yaxis: { title: { text: "count" } }, legend: { orientation: "h", y: -0.25 } }, PLOT_CONFIG);
      Plotly.react(heat.chart, [{ type: "heatmap", z: ev.heatmap, colorscale: "Viridis", colorbar: { title: { text: "|error|" } },
        hovertemplate: "row %{y}, col %{x}: %{z:.2e}<extra></extra>" }],
      { ...BASE_LAYOUT, title: { text: "|w − dequantized w|, top-left 48×48" }, xaxis: { title: { text: "input channel" } },
        yaxis: { title: { text: "output channel" }, autorange: "reversed" } }, PLOT_CONFIG);
    }
    hist.summary.textContent = `${grid.length} of the format's levels (red ticks, spaced by a typical group's scale ${ev.grid_scale.toExponential(2)}) ` +
      `fall inside the weights' range ${fixed(lo, 3)} … ${fixed(hi, 3)}; every weight is rounded to one of them (orange: the weights after).`;
    heat.summary.textContent = `Errors are largest where a group's scale is large: one big weight widens the grid for its whole group. ` +
      `Largest error here ${ev.max_abs_error.toExponential(2)}.`;
  }

  function showOutliers(ev) {
    const layers = ev.outliers_per_layer_attn.map((_, i) => i);
    if (Plotly) {
      Plotly.react(outl.chart, [
        { type: "bar", x: layers, y: ev.outliers_per_layer_attn, name: "into wqkv" },
        { type: "bar", x: layers, y: ev.outliers_per_layer_mlp, name: "into w_down" },
      ], { ...BASE_LAYOUT, barmode: "group", title: { text: `Outlier input channels<br><sub>|x| > ${ev.threshold} for your prompt</sub>` },
        xaxis: { title: { text: "layer" }, dtick: 2 }, yaxis: { title: { text: "outlier channels" } }, legend: { orientation: "h", y: -0.25 } }, PLOT_CONFIG);
    }
    const total = ev.outliers_per_layer_mlp.reduce((a, b) => a + b, 0) + ev.outliers_per_layer_attn.reduce((a, b) => a + b, 0);
    const maxA = Math.max(...ev.channel_absmax);
    outl.summary.textContent = `${total} channel-layer pairs exceed ${ev.threshold} in magnitude; LLM.int8() keeps exactly those columns in floating point. ` +
      `In layer ${ev.layer}'s ${ev.projection} input the largest channel reaches ${fixed(maxA, 2)} (channels ${ev.top_channels.slice(0, 3).join(", ")} lead).`;
  }

  function showToken(ev) {
    const span = el("span", { text: ev.text });
    if (ev.variant !== "fp32" && !ev.same_as_fp32) {
      span.style.textDecoration = "underline wavy #d62728";
      span.title = `step ${ev.step}: differs from fp32`;
    }
    (ev.variant === "fp32" ? textFp : textQ).append(span);
  }

  function showSummary(s) {
    runOut.set("agree", `${Math.round(s.agreement * 100)} % of ${s.n_generated} tokens`);
    runOut.set("first", s.first_divergence < 0 ? "none: identical text" : `step ${s.first_divergence}`);
    runOut.set("speed", `${fixed(s.fp32_decode_tokens_per_s, 1)} / ${fixed(s.quant_decode_tokens_per_s, 1)} (shared CPU; kernel ${s.kernels.join(", ")})`);
    runOut.set("stream", `${formatBytes(s.fp32_matmul_bytes)} → ${formatBytes(s.quant_matmul_bytes)}`);
    showWhy(why, quantNote(s));
  }

  function showFormats(ev) {
    const rows = ev.rows || [];
    tradeTable.replaceChildren(el("caption", { text: `Recorded: ${ev.source}` }),
      el("tr", {}, ...["format", "weights read per token, MiB", "model in memory, MiB", "perplexity", "KL vs fp32", "decode tok/s", "kernel"].map((h) => el("th", { scope: "col", text: h }))),
      ...rows.map((r) => el("tr", { "data-current": r.format === state.fmt ? "true" : null },
        el("th", { scope: "row", text: r.format }), el("td", { text: fixed(r.matmul_weight_bytes / MiB, 1) }),
        el("td", { text: r.resident_bytes ? fixed(r.resident_bytes / MiB, 1) : "" }),
        el("td", { text: fixed(r.perplexity, 2) }), el("td", { text: fixed(r.kl_vs_fp32, 4) }),
        el("td", { text: fixed(r.decode_tokens_per_s, 1) }), el("td", { text: r.kernels.join(", ") }))));
    if (!rows.length) { trade.summary.textContent = "No recorded table on this server."; return; }
    const maxSpeed = Math.max(...rows.map((r) => r.decode_tokens_per_s));
    if (Plotly) {
      // One trace per format: the legend names each point (this run's format outlined in black).
      const mib = rows.map((r) => r.matmul_weight_bytes / MiB);
      Plotly.react(trade.chart, rows.map((r, i) => ({ type: "scatter", mode: "markers", name: r.format,
        x: [mib[i]], y: [r.perplexity], customdata: [r.decode_tokens_per_s],
        marker: { size: 10 + 30 * r.decode_tokens_per_s / maxSpeed, color: FORMAT_COLORS[i % FORMAT_COLORS.length], opacity: 0.8,
          line: r.format === state.fmt ? { color: "#000", width: 3 } : { width: 0 } },
        hovertemplate: `${r.format}: %{x:.0f} MiB, perplexity %{y:.2f}, %{customdata:.1f} tok/s<extra></extra>` })),
      { ...BASE_LAYOUT, title: { text: "Bytes per token vs perplexity<br><sub>bigger marker = faster decode; outlined: your format</sub>" },
        showlegend: true, legend: { orientation: "h", y: -0.3, itemsizing: "constant" }, margin: { ...BASE_LAYOUT.margin, b: 90 },
        xaxis: { title: { text: "matmul weights, MiB" }, type: "log", ...logTicks(Math.min(...mib) * 0.9, Math.max(...mib) * 1.1) },
        yaxis: { title: { text: "perplexity (held-out text)" } } }, PLOT_CONFIG);
    }
    const fp = rows.find((r) => r.format === "fp32");
    const best = [...rows].sort((a, b) => b.decode_tokens_per_s - a.decode_tokens_per_s)[0];
    trade.summary.textContent = fp ? `fp32 streams ${fixed(fp.matmul_weight_bytes / MiB, 0)} MiB per token at ${fixed(fp.decode_tokens_per_s, 1)} tok/s; ` +
      `the fastest format, ${best.format}, streams ${fixed(best.matmul_weight_bytes / MiB, 0)} MiB at ${fixed(best.decode_tokens_per_s, 1)} tok/s with perplexity ${fixed(best.perplexity, 2)} vs ${fixed(fp.perplexity, 2)}.` : "";
  }
  return shell;
}
