// Model parallelism: the course model split across two processes (torch.distributed), by heads and MLP columns
// (tensor parallel) or by layers (pipeline). The picture stacks each rank's compute and communication per step on
// the step timeline (parallel-steps.js); the cards put the tokens beside the ones one process chose.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, numberField, outputs, selectField } from "../calculators/ui.js";
import { demoShell, intIn, promptField } from "./course-demo-kit.js";
import { fillForm } from "./restore-form.js";
import { ms, parallelSteps } from "./parallel-steps.js";
import { specParams } from "./spec-params.js";

const COMPUTE = ["#1f77b4", "#2ca02c"];
const COMM = ["#ff7f0e", "#d62728"];
const CARDS = [["split", "Split"], ["step", "This step (per rank: compute + communication)"],
  ["tokens", "Tokens, 2 processes"], ["reference", "Tokens, 1 process"], ["same", "Identical"]];

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/tensor_parallel.py), embedded in the page.
  const sp = specParams(config);
  const prompt = promptField(`Prompt (at most ${sp.param("prompt").max_tokens} tokens)`, sp.value("prompt"));
  const newTokens = numberField("New tokens", sp.value("max_new_tokens"), sp.range("max_new_tokens", { step: 1 }));
  const split = selectField("Split", sp.choices("split", { tensor: "tensor (heads and MLP columns)",
    pipeline: "pipeline (layers 0–14 | 15–29)" }), sp.value("split"));
  const out = outputs(CARDS, "Model-parallel run results");
  const chart = chartBlock("Picture of this step: stacked bars of each rank's compute and communication time per step");
  let Plotly = null;
  let steps = parallelSteps();

  const shell = demoShell(root, config, {
    title: "Splitting the model across two processes",
    fields: [prompt.label, newTokens.label, split.label],
    getParams() {
      if (!prompt.input.value.trim()) throw new Error("Enter a prompt first.");
      return { prompt: prompt.input.value, split: split.input.value,
        max_new_tokens: intIn(newTokens.input, "New tokens", sp.min("max_new_tokens"), sp.max("max_new_tokens")) };
    },
    onStart(params) {
      fillForm({ prompt: prompt.input, max_new_tokens: newTokens.input, split: split.input }, params);
      steps = parallelSteps();
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
    if (step.kind === "plan") for (const [k] of CARDS) out.set(k, "–");
    out.set("split", step.split || "–");
    if (step.kind !== "plan") {
      const last = step.rows[step.current];
      if (last) out.set("step", last.ranks.map((r) => `rank ${r.rank}: ${ms(r.compute_s)} + ${ms(r.comm_s)}`).join(" · "));
      out.set("tokens", step.tokens);
      out.set("reference", step.reference);
      out.set("same", step.identical ? "yes, every token" : "no");
    }
    if (Plotly) drawBars(step);
  }

  /** x: (step, rank) pairs; each bar stacks that rank's compute under its communication for that step. */
  function drawBars(step) {
    const rows = step.rows;
    const nRanks = rows.length ? rows[0].ranks.length : 0;
    const traces = [];
    for (let r = 0; r < nRanks; r += 1) {
      const x = [rows.map((s) => `step ${s.step}`), rows.map(() => `rank ${r}`)];
      const width = rows.map((_, i) => (i === step.current ? 0.9 : 0.7));
      traces.push({ type: "bar", name: `rank ${r} compute`, x, y: rows.map((s) => 1000 * s.ranks[r].compute_s), width,
        marker: { color: COMPUTE[r % 2] }, hovertemplate: `rank ${r} compute %{y:.1f} ms<extra></extra>` });
      traces.push({ type: "bar", name: `rank ${r} communication`, x, y: rows.map((s) => 1000 * s.ranks[r].comm_s), width,
        marker: { color: COMM[r % 2], pattern: { shape: "/" } }, hovertemplate: `rank ${r} communication %{y:.1f} ms<extra></extra>` });
    }
    Plotly.react(chart.chart, traces, {
      ...BASE_LAYOUT, barmode: "stack", height: 380, showlegend: true, legend: { orientation: "h", y: -0.3 },
      title: { text: "Compute and communication per step, each rank" }, margin: { ...BASE_LAYOUT.margin, b: 110 },
      xaxis: { type: "multicategory", automargin: true }, yaxis: { title: { text: "ms" }, rangemode: "tozero" },
    }, PLOT_CONFIG);
  }
  return shell;
}
