// KV-cache size calculator: 2 × layers × kv_heads × head_dim × bytes × tokens × batch, from real model
// shapes, with MHA vs GQA vs MQA side by side. Props: {"model", "tokens", "batch", "precision"}.
import { MODELS, attentionVariants, formatBytes, kvBytesPerToken, kvCacheBytes, weightBytes } from "./formulas.js";
import { bytesLogTicks, logTicks } from "../units.js";
import {
  BASE_LAYOUT, PLOT_CONFIG, autoMount, chartBlock, el, ensurePlotly, numberField, outputs, selectField,
} from "./ui.js";

const PRECISIONS = [["bf16", "BF16 / FP16 (2 bytes)"], ["fp32", "FP32 (4 bytes)"], ["fp8", "FP8 / INT8 (1 byte)"], ["int4", "INT4 (0.5 byte)"]];
const CONTEXTS = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072];

export function mount(root, props = {}) {
  const start = MODELS[props.model] ? props.model : "llama-3-8b";
  const model = selectField("Model", [...Object.entries(MODELS).map(([k, m]) => [k, m.label]), ["custom", "Custom shape"]], start);
  const m0 = MODELS[start];
  const layers = numberField("Layers", m0.layers, { min: 1, max: 200, step: 1 });
  const qHeads = numberField("Query heads", m0.qHeads, { min: 1, max: 256, step: 1 });
  const kvHeads = numberField("KV heads", m0.kvHeads, { min: 1, max: 256, step: 1, help: "GQA: fewer KV heads than query heads" });
  const headDim = numberField("Head dimension", m0.headDim, { min: 1, max: 1024, step: 1 });
  const precision = selectField("KV precision", PRECISIONS, props.precision || "bf16");
  const tokens = numberField("Tokens per sequence", props.tokens || 4096, { min: 1, max: 2_000_000, step: 1 });
  const batch = numberField("Sequences in the batch", props.batch || 1, { min: 1, max: 4096, step: 1 });
  const status = el("p", { class: "ilab-calc__status", role: "status" });
  const out = outputs([["perToken", "KV bytes per token"], ["perSeq", "Per sequence"], ["total", "Whole batch"],
    ["weights", "Weights at the same precision"]], "KV cache size");
  const table = el("table", {}, el("caption", { text: "The same model with three attention layouts (per token and for the whole batch)" }),
    el("thead", {}, el("tr", {}, ...["Layout", "KV heads", "Query heads per KV head", "Per token", "Whole batch"].map((t) => el("th", { scope: "col", text: t })))),
    el("tbody"));
  const chart = chartBlock("Line chart: KV cache size against context length for MHA, GQA and MQA");
  root.append(el("div", { class: "ilab-calc" },
    el("h3", { text: "KV-cache size calculator" }),
    el("form", { "aria-label": "KV cache calculator inputs" },
      el("fieldset", {}, el("legend", { text: "Model shape and workload" }), model.label, layers.label, qHeads.label,
        kvHeads.label, headDim.label, precision.label, tokens.label, batch.label)),
    status, out.node, table, chart.figure));

  let Plotly = null;
  ensurePlotly(props.plotlyUrl).then((P) => { Plotly = P; update(); }).catch(() => {});

  model.input.addEventListener("change", () => {
    const m = MODELS[model.input.value];
    if (!m) return;
    layers.input.value = m.layers; qHeads.input.value = m.qHeads; kvHeads.input.value = m.kvHeads; headDim.input.value = m.headDim;
    update();
  });
  for (const f of [layers, qHeads, kvHeads, headDim]) {
    f.input.addEventListener("input", () => { model.input.value = "custom"; update(); });
  }
  for (const f of [precision, tokens, batch]) f.input.addEventListener("input", update);

  function update() {
    const shape = { layers: +layers.input.value, qHeads: +qHeads.input.value, kvHeads: +kvHeads.input.value, headDim: +headDim.input.value };
    const p = precision.input.value;
    const n = Math.round(+tokens.input.value);
    const b = Math.round(+batch.input.value);
    let variants;
    try {
      if (shape.qHeads % shape.kvHeads !== 0) throw new RangeError("query heads must be a multiple of KV heads");
      variants = attentionVariants(shape, p);
      out.set("perToken", `${formatBytes(kvBytesPerToken({ ...shape, precision: p }))} (${kvBytesPerToken({ ...shape, precision: p }).toLocaleString("en-US")} B)`);
      out.set("perSeq", formatBytes(kvCacheBytes({ ...shape, precision: p, tokens: n })));
      out.set("total", formatBytes(kvCacheBytes({ ...shape, precision: p, tokens: n, batch: b })));
      const mm = MODELS[model.input.value];
      out.set("weights", mm ? formatBytes(weightBytes(mm.params, p)) : "–");
      status.textContent = "";
      status.classList.remove("is-error");
    } catch (err) {
      status.textContent = `Check the inputs: ${err.message}.`;
      status.classList.add("is-error");
      return;
    }
    const tbody = table.querySelector("tbody");
    tbody.replaceChildren(...variants.map((v) => el("tr", {},
      el("th", { scope: "row", text: v.name + (v.kvHeads === shape.kvHeads ? " (this model)" : "") }),
      el("td", { text: String(v.kvHeads) }), el("td", { text: String(v.queriesPerKvHead) }),
      el("td", { text: formatBytes(v.bytesPerToken) }), el("td", { text: formatBytes(v.bytesPerToken * n * b) }))));
    const [mha, gqa, mqa] = variants;
    chart.summary.textContent = `At ${n.toLocaleString("en-US")} tokens × ${b} sequence(s): MHA ${formatBytes(mha.bytesPerToken * n * b)}, ` +
      `GQA with ${gqa.kvHeads} KV heads ${formatBytes(gqa.bytesPerToken * n * b)}, MQA ${formatBytes(mqa.bytesPerToken * n * b)}.`;
    if (!Plotly) return;
    const traces = variants.map((v) => {
      const bytes = CONTEXTS.map((c) => v.bytesPerToken * c * b);
      return { x: CONTEXTS, y: bytes, name: `${v.name} (${v.kvHeads} KV heads)`, type: "scatter", mode: "lines+markers",
        text: bytes.map((y) => formatBytes(y)), hovertemplate: `${v.name}: %{text} at %{x:,} tokens<extra></extra>` };
    });
    const all = traces.flatMap((t) => t.y);
    Plotly.react(chart.chart, traces, { ...BASE_LAYOUT, title: { text: `KV cache for ${b} sequence(s)` },
      xaxis: { title: { text: "tokens per sequence" }, type: "log", ...logTicks(CONTEXTS[0], CONTEXTS[CONTEXTS.length - 1]) },
      yaxis: { title: { text: "KV cache size" }, type: "log", ...bytesLogTicks(Math.min(...all), Math.max(...all)) },
      legend: { orientation: "h", y: -0.25 } }, PLOT_CONFIG);
  }
  update();
}

autoMount("kv-size", mount);
