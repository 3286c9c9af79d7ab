// GPU memory and decode-ceiling calculator: model size × precision → memory (weights + KV cache + overhead),
// GPUs needed, and the batch-1 decode ceiling (bandwidth / bytes read per token) on each GPU.
// Props: {"model", "precision", "gpu", "tokens", "batch"}.
import { BYTES_PER_VALUE, GB, GPUS, MODELS, formatDecimal, kvBytesPerToken, memoryPlan } from "./formulas.js";
import {
  BASE_LAYOUT, PLOT_CONFIG, autoMount, chartBlock, el, ensurePlotly, fmtNum, numberField, outputs, selectField,
} from "./ui.js";

const PRECISIONS = [["fp32", "FP32 (4 bytes)"], ["bf16", "BF16 / FP16 (2 bytes)"], ["int8", "INT8 / FP8 (1 byte)"], ["int4", "INT4 / NF4 (0.5 byte)"]];

export function mount(root, props = {}) {
  const startModel = MODELS[props.model] ? props.model : "llama-3-8b";
  const model = selectField("Model", Object.entries(MODELS).map(([k, m]) => [k, m.label]), startModel);
  const params = numberField("Parameters (billions)", MODELS[startModel].params / 1e9, { min: 0.01, max: 2000, step: "any" });
  const precision = selectField("Weight precision", PRECISIONS, props.precision || "bf16");
  const gpu = selectField("GPU", Object.entries(GPUS).map(([k, g]) => [k, `${g.label} · ${formatDecimal(g.bandwidth, "B/s")}`]), props.gpu || "h100-sxm");
  const tokens = numberField("Context tokens per sequence", props.tokens ?? 4096, { min: 0, max: 1_000_000, step: 1 });
  const batch = numberField("Concurrent sequences", props.batch || 1, { min: 1, max: 1024, step: 1 });
  const overhead = numberField("Runtime overhead (%)", props.overhead ?? 10, { min: 0, max: 100, step: 1, help: "activations, CUDA context, fragmentation" });
  const out = outputs([["weights", "Weights"], ["kv", "KV cache (bf16)"], ["total", "Total with overhead"], ["gpus", "GPUs needed"],
    ["ceiling", "Decode ceiling, batch 1 (on those GPUs)"]], "Memory and speed");
  const chart = chartBlock("Bar chart: batch-1 decode ceiling in tokens per second on each GPU type, with the model split over as many GPUs as it needs");
  const memChart = chartBlock("Bar chart: weight memory at each precision against the chosen GPU's memory");
  root.append(el("div", { class: "ilab-calc" }, el("h3", { text: "Memory and decode ceiling per GPU" }),
    el("form", { "aria-label": "GPU memory calculator inputs" }, el("fieldset", {}, el("legend", { text: "Model and deployment" }),
      model.label, params.label, precision.label, gpu.label, tokens.label, batch.label, overhead.label)),
    out.node, el("div", { class: "ilab-calc__charts" }, memChart.figure, chart.figure)));

  let Plotly = null;
  ensurePlotly(props.plotlyUrl).then((P) => { Plotly = P; update(); }).catch(() => {});
  model.input.addEventListener("change", () => { params.input.value = MODELS[model.input.value].params / 1e9; update(); });
  for (const f of [params, precision, gpu, tokens, batch, overhead]) f.input.addEventListener("input", update);

  function plan(g, p) {
    const m = MODELS[model.input.value];
    return memoryPlan({ params: +params.input.value * 1e9, precision: p, kvBytesPerTokenValue: kvBytesPerToken({ ...m, precision: "bf16" }),
      tokens: Math.round(+tokens.input.value), batch: Math.round(+batch.input.value), overhead: +overhead.input.value / 100,
      gpuMemoryGB: g.memoryGB, bandwidth: g.bandwidth });
  }

  function update() {
    const g = GPUS[gpu.input.value];
    const p = precision.input.value;
    let r;
    try { r = plan(g, p); } catch (err) { out.set("total", `check inputs (${err.message})`); return; }
    out.set("weights", formatDecimal(r.weights, "B"));
    out.set("kv", formatDecimal(r.kv, "B"));
    out.set("total", formatDecimal(r.total, "B"));
    out.set("gpus", r.fitsOneGpu ? `1 (${g.memoryGB} GB)` : `${r.nGpus} × ${g.memoryGB} GB`);
    out.set("ceiling", `${fmtNum(r.decodeTokensPerS)} tokens/s`);
    const all = Object.entries(GPUS).map(([k, gg]) => ({ k, g: gg, r: plan(gg, p) }));
    chart.summary.textContent = all.map(({ g: gg, r: rr }) => `${gg.label}: ${fmtNum(rr.decodeTokensPerS)} tokens/s on ${rr.nGpus} GPU(s)`).join("; ") +
      ". With several GPUs each reads its share of the weights in parallel; the time they spend exchanging results is ignored, so real speeds are lower.";
    const perPrecision = PRECISIONS.map(([k]) => ({ k, bytes: +params.input.value * 1e9 * BYTES_PER_VALUE[k] }));
    memChart.summary.textContent = `Weights: ${perPrecision.map(({ k, bytes }) => `${k.toUpperCase()} ${formatDecimal(bytes, "B")}`).join(", ")}; the ${g.label} holds ${g.memoryGB} GB.`;
    if (!Plotly) return;
    Plotly.react(chart.chart, [{ type: "bar", x: all.map(({ g: gg }) => gg.label), y: all.map(({ r: rr }) => rr.decodeTokensPerS),
      text: all.map(({ r: rr }) => `${rr.nGpus} GPU${rr.nGpus > 1 ? "s" : ""}`), textposition: "outside",
      hovertemplate: "%{x}: %{y:.0f} tokens/s (%{text})<extra></extra>" }],
    { ...BASE_LAYOUT, title: { text: `Decode ceiling at batch 1<br><sub>${p.toUpperCase()} weights, split over the GPUs needed</sub>` },
      xaxis: { automargin: true, tickangle: -30 }, yaxis: { title: { text: "tokens/s (upper bound)" } } }, PLOT_CONFIG);
    Plotly.react(memChart.chart, [{ type: "bar", x: perPrecision.map(({ k }) => k.toUpperCase()), y: perPrecision.map(({ bytes }) => bytes / GB),
      hovertemplate: "%{x}: %{y:.1f} GB<extra></extra>", name: "weights" }],
    { ...BASE_LAYOUT, title: { text: "Weights by precision" }, yaxis: { title: { text: "GB" } },
      shapes: [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: g.memoryGB, y1: g.memoryGB, line: { color: "#b00020", dash: "dash" } }],
      annotations: [{ xref: "paper", x: 1, y: g.memoryGB, text: `${g.label}`, showarrow: false, xanchor: "right", yanchor: "bottom" }] }, PLOT_CONFIG);
  }
  update();
}

autoMount("gpu-memory", mount);
