// What a million tokens cost on this server: 1, 2, 4, … requests served at once on the real engine, each batch's
// output tokens per second turned into dollars per million at the student's price per hour, beside each request's
// time per token. The step timeline (cost-steps.js) walks the batch sizes as they were measured, then the summary;
// the chart and the cards follow it.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, numberField, outputs, selectField } from "../calculators/ui.js";
import { demoShell, intIn, numIn } from "./course-demo-kit.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";
import { costSteps, dollars, ms } from "./cost-steps.js";

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/token_cost.py), embedded in the page.
  const sp = specParams(config);
  const maxBatch = selectField("Largest batch", sp.choices("max_batch"), String(sp.value("max_batch")));
  const tokens = numberField("Tokens per request", sp.value("new_tokens"), sp.range("new_tokens", { step: 1 }));
  const price = numberField("Price of this server per hour ($)", sp.value("price_per_hour"), sp.range("price_per_hour", { step: 0.01 }));
  const target = numberField("Target time per token (ms)", sp.value("target_tpot_ms"), sp.range("target_tpot_ms", { step: 1 }));
  const out = outputs([["batch", "Batch size at this step"], ["rate", "Output tokens per second"],
    ["cost", "Dollars per million tokens"], ["tpot", "Time per token, each request (median)"]], "Token cost results");
  const chart = chartBlock("Cost per million tokens by batch size, with each request's time per token");
  let Plotly = null;
  let steps = costSteps();

  const shell = demoShell(root, config, {
    title: "What a token costs",
    fields: [maxBatch.label, tokens.label, price.label, target.label],
    getParams() {
      return { max_batch: Number(maxBatch.input.value),
        new_tokens: intIn(tokens.input, "Tokens per request", sp.min("new_tokens"), sp.max("new_tokens")),
        price_per_hour: numIn(price.input, "Price per hour", sp.min("price_per_hour"), sp.max("price_per_hour")),
        target_tpot_ms: numIn(target.input, "Target time per token", sp.min("target_tpot_ms"), sp.max("target_tpot_ms")) };
    },
    onStart(params) {
      fillForm({ max_batch: maxBatch.input, new_tokens: tokens.input, price_per_hour: price.input, target_tpot_ms: target.input }, params);
      steps = costSteps();
      for (const k of ["batch", "rate", "cost", "tpot"]) out.set(k, "–");
      chart.summary.textContent = "";
    },
    onEvent() {},
    steps: { fromEvent: (ev) => steps.fromEvent(ev), draw, picture: () => [out.node, chart.figure] },
  });
  shell.body.append(out.node, chart.figure);
  shell.plotly.then((P) => { Plotly = P; });

  function draw(step) {
    chart.summary.textContent = step.caption;
    const shown = step.kind === "point" ? step.points[step.current]
      : step.points.find((p) => p.batch_size === step.summary.cheapest_batch);
    if (shown) {
      out.set("batch", step.kind === "point" ? String(shown.batch_size) : `${shown.batch_size} (the cheapest)`);
      out.set("rate", shown.output_tokens_per_s.toFixed(1));
      out.set("cost", dollars(shown.usd_per_million));
      out.set("tpot", ms(shown.tpot_median_s));
    }
    if (!Plotly) return;
    const x = step.points.map((p) => String(p.batch_size));
    const marked = step.kind === "point" ? step.current : step.points.indexOf(shown);
    const traces = [
      { type: "bar", name: "$ per million tokens", x, y: step.points.map((p) => p.usd_per_million),
        marker: { color: step.points.map((_, i) => (i === marked ? "#d62728" : "#9ca3af")) },
        hovertemplate: "batch %{x}<br>$%{y:.2f} a million<extra></extra>" },
      { type: "scatter", mode: "lines+markers", name: "time per token (ms)", x, y: step.points.map((p) => p.tpot_median_s * 1000),
        yaxis: "y2", marker: { color: "#111" }, hovertemplate: "batch %{x}<br>%{y:.0f} ms per token<extra></extra>" },
    ];
    const shapes = step.kind === "summary" ? [{ type: "line", xref: "paper", x0: 0, x1: 1, yref: "y2",
      y0: step.summary.target_tpot_s * 1000, y1: step.summary.target_tpot_s * 1000, line: { color: "#2ca02c", dash: "dash" } }] : [];
    Plotly.react(chart.chart, traces, {
      ...BASE_LAYOUT, title: { text: "Cheaper per token, slower per request" }, height: 360, showlegend: true,
      legend: { orientation: "h", y: -0.3 }, margin: { ...BASE_LAYOUT.margin, r: 60, b: 90 }, shapes,
      xaxis: { type: "category", title: { text: "requests served at once" } },
      yaxis: { title: { text: "$ per million tokens" }, rangemode: "tozero" },
      yaxis2: { title: { text: "ms per token" }, overlaying: "y", side: "right", rangemode: "tozero" },
    }, PLOT_CONFIG);
  }
  return shell;
}
