// Long context: the held-out text's last tokens scored with the full KV cache, then with caches of a fixed budget
// under three eviction policies (most recent only, attention sinks + most recent, H2O's heavy hitters). One chart is
// the picture: perplexity against budget per policy (top) and which tokens each policy kept at the step's budget
// (bottom); the step timeline (context-steps.js) walks the measurements as they came, and the cards follow it.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, numberField, outputs } from "../calculators/ui.js";
import { demoShell, intIn } from "./course-demo-kit.js";
import { contextSteps, curves, fmtPpl, keptCount } from "./context-steps.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";

const POLICY_COLORS = { recent: "#d62728", sinks: "#1f77b4", h2o: "#2ca02c" };
const ROW_NAMES = { full: "full", recent: "recent", sinks: "sinks", h2o: "H2O" };  // the kept panel's rows, short for a phone
const KEPT_COLORS = [[0, "#f3f4f6"], [0.5, "#6baed6"], [1, "#08306b"]];

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/long_context.py), embedded in the page.
  const sp = specParams(config);
  const context = numberField("Window (tokens of held-out text)", sp.value("context"), sp.range("context", { step: 1 }));
  const sinks = numberField("Sink tokens kept", sp.value("sinks"), sp.range("sinks", { step: 1 }));
  const out = outputs([["policy", "Policy at this step"], ["budget", "Cache budget"],
    ["ppl", "Perplexity of the last tokens"], ["ratio", "Against the full cache"]], "Long-context results");
  const chart = chartBlock("Perplexity against cache budget, one line per eviction policy (top), and which tokens each policy kept at this step's budget (bottom)");
  let Plotly = null;
  let steps = contextSteps();

  const shell = demoShell(root, config, {
    title: "A fixed cache budget",
    fields: [context.label, sinks.label],
    getParams() {
      return { context: intIn(context.input, "Window", sp.min("context"), sp.max("context")),
        sinks: intIn(sinks.input, "Sink tokens", sp.min("sinks"), sp.max("sinks")) };
    },
    onStart(params) {
      fillForm({ context: context.input, sinks: sinks.input }, params);
      steps = contextSteps();
      for (const k of ["policy", "budget", "ppl", "ratio"]) out.set(k, "–");
      chart.summary.textContent = "";
    },
    onEvent() {},
    steps: { fromEvent: (ev) => steps.fromEvent(ev), draw, picture: () => [out.node, chart.figure] },
  });
  shell.body.append(out.node, chart.figure);
  shell.plotly.then((P) => { Plotly = P; });

  function draw(step) {
    const ev = step.ev;
    const n = step.window ? step.window.n_context : ev.kept.length;
    chart.summary.textContent = step.caption;
    out.set("policy", ev.label);
    out.set("budget", `${ev.budget} of ${n} tokens (${keptCount(ev.kept)} seen by the last token)`);
    out.set("ppl", `${fmtPpl(ev.perplexity)} over ${ev.n_scored} tokens`);
    out.set("ratio", step.full ? `${(ev.perplexity / step.full.perplexity).toFixed(2)}×` : "–");
    if (Plotly) drawPicture(step, n);
  }

  function drawPicture(step, n) {
    const names = Object.fromEntries((step.window ? step.window.policies : []).map((p) => [p.policy, p.label]));
    const lines = curves(step.points).map((c) => ({
      type: "scatter", mode: "lines+markers", name: names[c.policy] || c.policy, x: c.budgets, y: c.perplexities,
      line: { color: POLICY_COLORS[c.policy] }, marker: { size: 8 },
      hovertemplate: "budget %{x}<br>perplexity %{y:.2f}<extra>%{fullData.name}</extra>",
    }));
    const traces = [...lines, { type: "scatter", mode: "markers", name: "this step", x: [step.ev.budget],
      y: [step.ev.perplexity], marker: { size: 16, symbol: "circle-open", color: "#111", line: { width: 2 } },
      hoverinfo: "skip" }];
    const shapes = step.full ? [{ type: "line", xref: "paper", x0: 0, x1: 1, yref: "y", y0: step.full.perplexity,
      y1: step.full.perplexity, line: { dash: "dash", color: "#6b7280" } }] : [];
    const kept = step.kept;
    traces.push({ type: "heatmap", xaxis: "x2", yaxis: "y2", z: kept.map((p) => p.kept), zmin: 0, zmax: 1,
      x: [...Array(n).keys()], y: kept.map((p) => ROW_NAMES[p.policy]), colorscale: KEPT_COLORS, showscale: false,
      hovertemplate: "%{y}<br>token %{x}<br>in %{z:.0%} of the caches<extra></extra>" });
    const budgets = step.window ? step.window.budgets : [step.ev.budget];
    // On a phone the legend's rows would cover the title: they go under the chart instead.
    const narrow = chart.chart.clientWidth < 560;
    Plotly.react(chart.chart, traces, {
      ...BASE_LAYOUT, height: narrow ? 620 : 540, showlegend: true,
      margin: { ...BASE_LAYOUT.margin, t: narrow ? 56 : 96, b: narrow ? 150 : BASE_LAYOUT.margin.b },
      legend: narrow ? { orientation: "h", x: 0, y: -0.16, yanchor: "top" } : { orientation: "h", x: 0, y: 1.01, yanchor: "bottom" },
      title: { text: narrow ? "Perplexity against cache budget" : `Perplexity of the last ${step.ev.n_scored} tokens against cache budget`,
        y: 0.985, yanchor: "top" },
      // The whole range of budgets from the first step, so the axis stays put while the curves grow.
      xaxis: { type: "log", title: { text: "cache budget (tokens, log)" }, tickvals: budgets, domain: [0, 1],
        range: [Math.log10(Math.min(...budgets)) - 0.1, Math.log10(Math.max(...budgets)) + 0.1] },
      yaxis: { type: "log", dtick: "D2", title: { text: "perplexity" }, domain: [0.42, 1] },
      xaxis2: { anchor: "y2", range: [-0.5, n - 0.5], title: { text: `position in the window (budget ${step.ev.budget})` } },
      yaxis2: { anchor: "x2", domain: [0, 0.24], type: "category", automargin: true },
      annotations: step.full ? [{ xref: "paper", x: 1, y: Math.log10(step.full.perplexity), yref: "y", xanchor: "right",
        yanchor: "bottom", showarrow: false, text: `full cache ${fmtPpl(step.full.perplexity)}` }] : [],
      shapes,
    }, PLOT_CONFIG);
  }
  return shell;
}
