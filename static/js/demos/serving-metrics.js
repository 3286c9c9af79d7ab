// Serving-metrics demo: requests sent at the student's arrival rate (a Poisson process) to the course engine's
// batching service, measured as a serving benchmark measures a server. The step timeline walks every moment of every
// request (serving-metrics-steps.js): the picture is one row per request, waiting for its first token (grey) then
// streaming (blue when it met both targets, orange when it missed one), drawn up to the moment shown; the last step
// turns it into the run's latency distributions, TTFT and inter-token latency, with their p50, p99 and the target.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, numberField, outputs } from "../calculators/ui.js";
import { demoShell, intIn, numIn } from "./course-demo-kit.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";
import { secs, servingSteps } from "./serving-metrics-steps.js";

const WAIT = "#9ca3af";
const MET = "#1f77b4";
const MISSED = "#ff7f0e";
const CARDS = [["flight", "In flight / finished"], ["ttft", "TTFT p50 / p99"], ["itl", "Inter-token latency p50 / p99"],
  ["throughput", "Throughput"], ["goodput", "Goodput (met both targets)"]];

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/serving_metrics.py), embedded in the page.
  const sp = specParams(config);
  const field = (key, text, step) => numberField(text, sp.value(key) ?? "", sp.range(key, { step }));
  const rate = field("rate_per_s", "Arrival rate (requests per second)", 0.5);
  const duration = field("duration_s", "Arrivals for (seconds)", 1);
  const tokens = field("max_new_tokens", "Tokens per request", 1);
  const ttftSlo = field("ttft_slo_s", "TTFT target (s)", 0.05);
  const tpotSlo = field("tpot_slo_s", "TPOT target (s)", 0.01);
  const seed = field("seed", "Seed of the arrivals (empty = fresh each run)", 1);
  const budget = sp.limit("rate_per_s", "max_expected_requests");
  const out = outputs(CARDS, "Load test figures at this step");
  const chart = chartBlock("Picture of this step: one row per request, waiting for its first token then streaming its " +
    "tokens, up to the moment shown; at the end, the run's TTFT and inter-token latency distributions with p50, p99 and the target");
  let Plotly = null;
  let steps = servingSteps();

  const shell = demoShell(root, config, {
    title: "Load-test the course server",
    fields: [rate.label, duration.label, tokens.label, ttftSlo.label, tpotSlo.label, seed.label],
    getParams() {
      const params = {
        rate_per_s: numIn(rate.input, "Arrival rate", sp.min("rate_per_s"), sp.max("rate_per_s")),
        duration_s: numIn(duration.input, "Arrivals for", sp.min("duration_s"), sp.max("duration_s")),
        max_new_tokens: intIn(tokens.input, "Tokens per request", sp.min("max_new_tokens"), sp.max("max_new_tokens")),
        ttft_slo_s: numIn(ttftSlo.input, "TTFT target", sp.min("ttft_slo_s"), sp.max("ttft_slo_s")),
        tpot_slo_s: numIn(tpotSlo.input, "TPOT target", sp.min("tpot_slo_s"), sp.max("tpot_slo_s")),
        seed: seed.input.value.trim() === "" ? null : intIn(seed.input, "Seed", sp.min("seed"), sp.max("seed")),
      };
      if (params.rate_per_s * params.duration_s > budget) {
        throw new Error(`Rate × duration is ${params.rate_per_s * params.duration_s} requests; one run holds at most ${budget}.`);
      }
      return params;
    },
    onStart(params) {
      fillForm({ rate_per_s: rate.input, duration_s: duration.input, max_new_tokens: tokens.input, ttft_slo_s: ttftSlo.input,
        tpot_slo_s: tpotSlo.input, seed: seed.input }, params);
      steps = servingSteps({ ttft_slo_s: params.ttft_slo_s, tpot_slo_s: params.tpot_slo_s });
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
    const pair = (a, b, n) => (n ? `${secs(a)} / ${secs(b)}` : "–");
    out.set("ttft", pair(step.ttftP50, step.ttftP99, step.ttft.length));
    out.set("itl", pair(step.itlP50, step.itlP99, step.itl.length));
    if (step.kind === "moment") {
      out.set("flight", `${step.inFlight} / ${step.finished}`);
      out.set("throughput", "–");
      out.set("goodput", "–");
    } else {
      const s = step.ev;
      out.set("flight", `0 / ${s.n_finished}`);
      out.set("throughput", `${s.throughput_tokens_per_s.toFixed(1)} tokens/s`);
      out.set("goodput", `${s.goodput_requests_per_s.toFixed(2)} req/s (${s.n_met_slo} of ${s.n_finished})`);
    }
    if (!Plotly) return;
    if (step.kind === "moment") drawTimelines(step);
    else drawDistributions(step);
  }

  /** One row per request: grey from arrival to first token (or to now), then its tokens' stream to the last (or now). */
  function drawTimelines(step) {
    const now = step.t;
    const segments = { wait: [[], []], met: [[], []], missed: [[], []], running: [[], []] };
    const add = (kind, x0, x1, y) => { segments[kind][0].push(x0, x1, null); segments[kind][1].push(y, y, null); };
    for (const r of step.requests) {
      const y = `#${r.id}`;
      add("wait", r.arrival, r.first ?? now, y);
      if (r.first === null) continue;
      add(r.end === null ? "running" : r.met ? "met" : "missed", r.first, r.end ?? now, y);
    }
    // A busy run has up to a hundred rows: the chart stays one screen tall (with the timeline docked under it) and
    // its bars get thinner instead.
    const rows = step.requests.length;
    const height = Math.min(560, 200 + 14 * Math.max(6, rows));
    const width = Math.max(2, Math.min(7, (height - 160) / Math.max(rows, 1) - 2));
    const line = (kind, name, color) => ({ type: "scatter", mode: "lines", name, x: segments[kind][0], y: segments[kind][1],
      line: { color, width }, connectgaps: false, hoverinfo: "skip" });
    Plotly.react(chart.chart, [line("wait", "waiting for the first token", WAIT), line("running", "streaming", MET),
      line("met", "finished, met both targets", MET), line("missed", "finished, missed a target", MISSED)], {
      ...BASE_LAYOUT, title: { text: `Every request up to ${now.toFixed(2)} s` }, height,
      showlegend: true, legend: { orientation: "h", y: -0.18 }, margin: { ...BASE_LAYOUT.margin, b: 90 },
      xaxis: { title: { text: "seconds since the first arrival" }, rangemode: "tozero" },
      yaxis: { type: "category", autorange: "reversed", title: { text: "request" }, automargin: true },
      shapes: [{ type: "line", xref: "x", x0: now, x1: now, yref: "paper", y0: 0, y1: 1, line: { color: "#111", width: 1, dash: "dot" } }],
    }, PLOT_CONFIG);
  }

  /** The share of requests (TTFT) or of token gaps (ITL) at or below each latency, with p50, p99 and the TTFT target. */
  function drawDistributions(step) {
    const s = step.ev;
    const cdf = (values) => {
      const sorted = [...values].sort((a, b) => a - b);
      return { x: sorted, y: sorted.map((_, i) => (i + 1) / sorted.length) };
    };
    const curve = (values, name, color) => ({ type: "scatter", mode: "lines", line: { shape: "hv", color, width: 2 }, name,
      ...cdf(values), hovertemplate: `${name}: %{y:.0%} at or below %{x:.3f} s<extra></extra>` });
    const vline = (x, color, dash) => ({ type: "line", xref: "x", x0: x, x1: x, yref: "paper", y0: 0, y1: 1, line: { color, width: 1.5, dash } });
    const label = (x, text, y) => ({ x, y, xref: "x", yref: "paper", text, showarrow: false, xanchor: "left", font: { size: 11 } });
    Plotly.react(chart.chart, [curve(step.ttft, "TTFT", MET), curve(step.itl, "inter-token latency", MISSED)], {
      ...BASE_LAYOUT, title: { text: "Latency distributions of the run" }, height: 380, showlegend: true,
      legend: { orientation: "h", y: -0.25 }, margin: { ...BASE_LAYOUT.margin, b: 100 },
      xaxis: { title: { text: "seconds (log scale)" }, type: "log" },
      yaxis: { title: { text: "share at or below" }, range: [0, 1.02], tickformat: ".0%" },
      shapes: [vline(s.ttft_p50_s, MET, "dot"), vline(s.ttft_p99_s, MET, "dash"), vline(s.ttft_slo_s, "#111", "solid")],
      annotations: [label(s.ttft_p50_s, "TTFT p50", 0.08), label(s.ttft_p99_s, "TTFT p99", 0.16),
        label(s.ttft_slo_s, "TTFT target", 0.96)],
    }, PLOT_CONFIG);
  }
  return shell;
}
