// Attention variants: which key/value head each of the model's query heads reads, then the student's prompt run with
// the heads averaged into one (MQA), with a sliding window, and with the window plus the first tokens (attention
// sinks), each measured against the model as trained. One chart is the picture; the step timeline (variant-steps.js)
// walks the heads, each variant as it was measured, and real models' cache per token, and the cards follow it.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, numberField, outputs } from "../calculators/ui.js";
import { demoShell, intIn, promptField } from "./course-demo-kit.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";
import { fmtBytes, variantSteps } from "./variant-steps.js";

const HEAD_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];
const WEIGHT_COLORS = [[0, "#ffffff"], [0.25, "#c6dbef"], [0.5, "#6baed6"], [0.75, "#2171b5"], [1, "#08306b"]];

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/attention_variants.py), embedded in the page.
  const sp = specParams(config);
  const prompt = promptField(`Prompt (at most ${sp.param("prompt").max_tokens} tokens)`, sp.value("prompt"));
  const layer = numberField("Layer shown", sp.value("layer"), sp.range("layer", { step: 1 }));
  const window_ = numberField("Sliding window (tokens)", sp.value("window"), sp.range("window", { step: 1 }));
  const out = outputs([["variant", "Variant at this step"], ["cache", "Cache for this prompt"],
    ["kl", "Mean KL from the model as trained"], ["top1", "Top token unchanged"]], "Attention variant results");
  const chart = chartBlock("Picture of this step: where each query head looks, what each variant costs against the cache it saves, or real models' cache per token");
  let Plotly = null;
  let steps = variantSteps();

  const shell = demoShell(root, config, {
    title: "Attention variants",
    fields: [prompt.label, layer.label, window_.label],
    getParams() {
      if (!prompt.input.value.trim()) throw new Error("Enter a prompt first.");
      return { prompt: prompt.input.value, layer: intIn(layer.input, "Layer", sp.min("layer"), sp.max("layer")),
        window: intIn(window_.input, "Sliding window", sp.min("window"), sp.max("window")) };
    },
    onStart(params) {
      fillForm({ prompt: prompt.input, layer: layer.input, window: window_.input }, params);
      steps = variantSteps();
      for (const k of ["variant", "cache", "kl", "top1"]) out.set(k, "–");
      chart.summary.textContent = "";
    },
    onEvent() {},
    steps: { fromEvent: (ev) => steps.fromEvent(ev), draw, picture: () => [out.node, chart.figure] },
  });
  shell.body.append(out.node, chart.figure);
  shell.plotly.then((P) => { Plotly = P; });

  function draw(step) {
    chart.summary.textContent = step.caption;
    if (step.kind === "variant") {
      const ev = step.ev;
      out.set("variant", ev.label);
      out.set("cache", `${fmtBytes(ev.kv_bytes_for_prompt)} (${fmtBytes(ev.kv_bytes_per_token)} a token)`);
      out.set("kl", `${ev.mean_kl.toFixed(3)} nats`);
      out.set("top1", `${Math.round(100 * ev.top1_agreement)}% of ${ev.n_tokens} positions`);
    } else {
      for (const k of ["variant", "cache", "kl", "top1"]) out.set(k, "–");
      if (step.kind === "groups") out.set("variant", "GQA as trained: the heads");
      if (step.kind === "budget") out.set("variant", "Real models (bf16)");
    }
    if (!Plotly) return;
    if (step.kind === "groups") drawGroups(step);
    else if (step.kind === "variant") drawVariants(step);
    else drawBudget(step);
  }

  /** Rows: query heads, grouped by the key/value head they read; columns: the prompt's tokens; cells: how much the
   * last token attends to each in that head. */
  function drawGroups(step) {
    const ev = step.ev;
    const rows = ev.kv_head_of.map((kv, h) => `q${h} → kv${kv}`);
    const x = ev.tokens.map((t, i) => `${i}: ${String(t).replace(/^ /, "␣")}`);
    Plotly.react(chart.chart, [{ type: "heatmap", z: ev.last_rows, x, y: rows, zmin: 0, zmax: 1, colorscale: WEIGHT_COLORS,
      xgap: 1, ygap: 1, colorbar: { title: { text: "weight", side: "right" }, thickness: 10 },
      hovertemplate: "%{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>" }], {
      ...BASE_LAYOUT, title: { text: `Layer ${ev.layer}: where the last token looks, per query head` },
      height: 360, xaxis: { type: "category", tickangle: -60, automargin: true, title: { text: "key token" } },
      yaxis: { type: "category", autorange: "reversed", automargin: true, title: { text: "query head → key/value head it reads" } },
      shapes: step.groups.slice(1).map((hs) => ({ type: "line", xref: "paper", x0: 0, x1: 1, yref: "y",
        y0: hs[0] - 0.5, y1: hs[0] - 0.5, line: { color: "#111", width: 2 } })),
    }, PLOT_CONFIG);
  }

  /** The variants measured so far: cache for the prompt (bars) beside how far each moved the model (KL, dots). */
  function drawVariants(step) {
    const names = step.variants.map((v) => v.label);
    const colors = step.variants.map((_, i) => (i === step.current ? HEAD_COLORS[1] : "#9ca3af"));
    Plotly.react(chart.chart, [
      { type: "bar", name: "cache for the prompt (KiB)", x: names, y: step.variants.map((v) => v.kv_bytes_for_prompt / 1024),
        marker: { color: colors }, hovertemplate: "%{x}<br>%{y:.0f} KiB<extra></extra>" },
      { type: "scatter", mode: "markers", name: "mean KL (nats)", x: names, y: step.variants.map((v) => v.mean_kl), yaxis: "y2",
        marker: { size: 12, color: "#111", symbol: "diamond" }, hovertemplate: "%{x}<br>KL %{y:.3f}<extra></extra>" },
    ], {
      ...BASE_LAYOUT, title: { text: "Cache saved against the model moved" }, height: 380, showlegend: true,
      legend: { orientation: "h", y: -0.35 }, margin: { ...BASE_LAYOUT.margin, r: 60, b: 110 },
      xaxis: { type: "category", automargin: true },
      yaxis: { title: { text: "cache for the prompt (KiB)" }, rangemode: "tozero" },
      yaxis2: { title: { text: "mean KL (nats)" }, overlaying: "y", side: "right", rangemode: "tozero" },
    }, PLOT_CONFIG);
  }

  function drawBudget(step) {
    // Short names on the axis (a phone's width); the configuration's kind is in the hover text.
    Plotly.react(chart.chart, [{ type: "bar", orientation: "h", y: step.rows.map((c) => c.model.replace(/ \(.*\)$/, "")),
      customdata: step.rows.map((c) => c.model),
      x: step.rows.map((c) => c.bytes_per_token / 1024), marker: { color: HEAD_COLORS[0] },
      text: step.rows.map((c) => fmtBytes(c.bytes_per_token)), textposition: "auto",
      hovertemplate: "%{customdata}<br>%{x:.1f} KiB per token<extra></extra>" }], {
      ...BASE_LAYOUT, title: { text: "Cache per token, bf16" }, height: 360,
      xaxis: { type: "log", title: { text: "KiB a token (log)" } }, yaxis: { automargin: true, type: "category" },
    }, PLOT_CONFIG);
  }
  return shell;
}
