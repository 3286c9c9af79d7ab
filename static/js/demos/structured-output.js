// Structured output: the real model asked for JSON (or a date), once as it is and once under the grammar's token
// mask, in the same batch; then valid replies over many seeded runs of each. One chart is the picture; the step
// timeline (mask-steps.js) walks the engine steps (how many tokens the grammar allowed at each, on a log scale, and
// the tokens chosen), the two replies, and the validity count, and the cards follow it.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, numberField, outputs, selectField } from "../calculators/ui.js";
import { demoShell, intIn, numIn, promptField } from "./course-demo-kit.js";
import { maskSteps, pct, quoted } from "./mask-steps.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";

const COLORS = { constrained: "#1f77b4", unconstrained: "#d62728" };
const CARDS = [["allowed", "Tokens the mask allows"], ["mass", "Model's probability on them"],
  ["constrained", "Chosen with the mask"], ["unconstrained", "Chosen without it"]];

export function mount(root, config = {}) {
  // Defaults, limits and the schema names come from the catalog's spec (demos/catalog/structured_output.py).
  const sp = specParams(config);
  const presets = (config.spec && config.spec.presets) || [];
  const labels = Object.fromEntries(presets.map((p) => [p.schema, p.label]));
  const schema = selectField("Schema", sp.choices("schema", labels), sp.value("schema"));
  const prompt = promptField(`Prompt (at most ${sp.param("prompt").max_tokens} tokens)`, sp.value("prompt"));
  const temperature = numberField("Temperature (0 = greedy)", sp.value("temperature"), sp.range("temperature", { step: 0.1 }));
  const maxNew = numberField("New tokens at most", sp.value("max_new_tokens"), sp.range("max_new_tokens", { step: 1 }));
  const runs = numberField("Runs of each for validity", sp.value("runs"), sp.range("runs", { step: 1 }));
  const seed = numberField("Seed of the first run", sp.value("seed"), sp.range("seed", { step: 1 }));
  schema.input.addEventListener("change", () => {
    const preset = presets.find((p) => p.schema === schema.input.value);
    if (preset) prompt.input.value = preset.prompt;  // each schema comes with a prompt that asks for it
  });
  const out = outputs(CARDS, "Structured output results");
  const chart = chartBlock("Picture of this step: tokens the grammar allows at each step, the two replies, or valid replies over many runs");
  let Plotly = null;
  let steps = maskSteps();

  const shell = demoShell(root, config, {
    title: "Structured output",
    fields: [schema.label, prompt.label, temperature.label, maxNew.label, runs.label, seed.label],
    getParams() {
      if (!prompt.input.value.trim()) throw new Error("Enter a prompt first.");
      return { schema: schema.input.value, prompt: prompt.input.value,
        temperature: numIn(temperature.input, "Temperature", sp.min("temperature"), sp.max("temperature")),
        max_new_tokens: intIn(maxNew.input, "New tokens", sp.min("max_new_tokens"), sp.max("max_new_tokens")),
        runs: intIn(runs.input, "Runs", sp.min("runs"), sp.max("runs")),
        seed: intIn(seed.input, "Seed", sp.min("seed"), sp.max("seed")) };
    },
    onStart(params) {
      fillForm({ schema: schema.input, prompt: prompt.input, temperature: temperature.input,
        max_new_tokens: maxNew.input, runs: runs.input, seed: seed.input }, params);
      steps = maskSteps();
      for (const [k] of CARDS) out.set(k, "–");
      chart.summary.textContent = "";
    },
    onEvent() {},
    steps: { fromEvent: (ev) => steps.fromEvent(ev), draw, picture: () => [out.node, chart.figure] },
  });
  shell.body.append(out.node, chart.figure);
  shell.plotly.then((P) => { Plotly = P; });

  function draw(step) {
    chart.summary.textContent = step.caption;
    for (const [k] of CARDS) out.set(k, "–");
    if (step.kind === "mask") {
      const c = step.ev.runs.constrained;
      const u = step.ev.runs.unconstrained;
      if (c) {
        out.set("allowed", `${c.n_allowed.toLocaleString("en-US")} of ${step.ev.vocab_size.toLocaleString("en-US")}`);
        out.set("mass", pct(c.allowed_mass));
        out.set("constrained", quoted(c.text));
      }
      if (u) out.set("unconstrained", quoted(u.text));
    } else if (step.kind === "texts") {
      out.set("constrained", step.texts.constrained.valid ? "valid" : "not valid");
      out.set("unconstrained", step.texts.unconstrained.valid ? "valid" : "not valid");
    } else {
      out.set("constrained", `${step.ev.valid.constrained}/${step.ev.runs} valid`);
      out.set("unconstrained", `${step.ev.valid.unconstrained}/${step.ev.runs} valid`);
    }
    if (!Plotly) return;
    if (step.kind === "validity") drawValidity(step);
    else drawMask(step);
  }

  /** Tokens the grammar allows at each step so far (log scale), the chosen token as the point's label. */
  function drawMask(step) {
    const traces = ["constrained", "unconstrained"].map((mode) => {
      const rows = step.history.map((ev) => ev.runs[mode]).filter((r) => r && r.n_allowed !== null);
      return { type: "scatter", mode: "lines+markers", name: mode === "constrained" ? "with the mask" : "without (what it would allow)",
        x: rows.map((r) => r.index + 1), y: rows.map((r) => r.n_allowed), text: rows.map((r) => quoted(r.text)),
        line: { color: COLORS[mode], shape: "hv", dash: mode === "constrained" ? "solid" : "dot" },
        hovertemplate: "token %{x}: %{y} allowed<br>chose %{text}<extra></extra>" };
    });
    const current = step.kind === "mask" && step.ev.runs.constrained ? step.ev.runs.constrained : null;
    Plotly.react(chart.chart, traces, {
      ...BASE_LAYOUT, title: { text: "Tokens the grammar allows at each step" }, height: 360, showlegend: true,
      legend: { orientation: "h", y: -0.3 }, margin: { ...BASE_LAYOUT.margin, b: 100 },
      xaxis: { title: { text: "token of the reply" }, rangemode: "tozero" },
      yaxis: { type: "log", title: { text: "allowed tokens (log scale)" } },
      shapes: current ? [{ type: "line", xref: "x", x0: current.index + 1, x1: current.index + 1, yref: "paper", y0: 0, y1: 1,
        line: { color: "#111", width: 1, dash: "dash" } }] : [],
    }, PLOT_CONFIG);
  }

  function drawValidity(step) {
    const modes = ["unconstrained", "constrained"];
    Plotly.react(chart.chart, [{ type: "bar", x: modes.map((m) => (m === "constrained" ? "with the mask" : "without")),
      y: modes.map((m) => step.ev.valid[m]), marker: { color: modes.map((m) => COLORS[m]) },
      text: modes.map((m) => `${step.ev.valid[m]}/${step.ev.runs}`), textposition: "auto",
      hovertemplate: "%{x}: %{y} valid<extra></extra>" }], {
      ...BASE_LAYOUT, title: { text: `Valid replies out of ${step.ev.runs} seeded runs` }, height: 340,
      yaxis: { title: { text: "valid replies" }, range: [0, step.ev.runs] }, xaxis: { type: "category" },
    }, PLOT_CONFIG);
  }
  return shell;
}
