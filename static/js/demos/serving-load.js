// Serving-load demo: a handful of requests against the course engine, measured like a load test —
// tokens over time (throughput), a timeline per request (queueing, first token, decode), TTFT/TPOT/ITL
// percentiles, goodput against your latency targets, and a table comparing your runs.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, el, fmtMs, numberField, outputs, selectField, fixed } from "../calculators/ui.js";
import { fillForm } from "./restore-form.js";
import { demoShell, intIn, numIn } from "./course-demo-kit.js";

export function mount(root, config = {}) {
  const p = config.params || {};
  const limits = (config.spec && config.spec.params) || {};
  const maxReq = (limits.n_requests && limits.n_requests.max) || 6;
  const maxNew = (limits.max_new_tokens && limits.max_new_tokens.max) || 24;
  const nReq = numberField("Requests", p.n_requests || 4, { min: 1, max: maxReq, step: 1 });
  const newTok = numberField("Tokens per request", p.max_new_tokens || 8, { min: 2, max: maxNew, step: 1 });
  const spacing = numberField("Seconds between arrivals", p.spacing_s ?? 0, { min: 0, max: 2, step: 0.1 });
  const mode = selectField("Scheduling", [["batched", "Batched (continuous batching)"], ["sequential", "One request at a time"]], p.mode || "batched");
  const ttftSlo = numberField("TTFT target (s)", p.ttft_slo_s ?? 3, { min: 0.05, max: 60, step: 0.05 });
  const tpotSlo = numberField("TPOT target (s)", p.tpot_slo_s ?? 0.5, { min: 0.01, max: 10, step: 0.01 });
  const note = el("p", { class: "ilab-calc__summary", "aria-live": "polite" });
  const out = outputs([["mode", "How requests ran"], ["throughput", "Throughput"], ["goodput", "Goodput"], ["ttft", "TTFT p50 / p90"],
    ["tpot", "TPOT p50"], ["itl", "ITL p50 / p90"], ["wall", "Wall time"]], "Load test results");
  const tokens = chartBlock("Line chart: tokens generated so far against time; the slope is the throughput");
  const timeline = chartBlock("Timeline chart: for each request, waiting before its first token and then decoding");
  const requests = el("table", {}, el("caption", { text: "Requests of the latest run" }),
    el("thead", {}, el("tr", {}, ...["#", "Prompt", "TTFT", "TPOT", "Met both targets", "Output"].map((t) => el("th", { scope: "col", text: t })))), el("tbody"));
  const runs = el("table", {}, el("caption", { text: "Your runs, for comparison" }),
    el("thead", {}, el("tr", {}, ...["Run", "Mode", "Requests × tokens", "Throughput (tokens/s)", "Goodput (req/s)", "TTFT p50", "TPOT p50"].map((t) => el("th", { scope: "col", text: t })))), el("tbody"));
  let Plotly = null;
  let state = null;
  let runNo = 0;

  const shell = demoShell(root, config, {
    title: "Serving load",
    fields: [nReq.label, newTok.label, spacing.label, mode.label, ttftSlo.label, tpotSlo.label],
    getParams() {
      return { n_requests: intIn(nReq.input, "Requests", 1, maxReq), max_new_tokens: intIn(newTok.input, "Tokens per request", 2, maxNew),
        spacing_s: numIn(spacing.input, "Seconds between arrivals", 0, 2), mode: mode.input.value,
        ttft_slo_s: numIn(ttftSlo.input, "TTFT target", 0.05, 60), tpot_slo_s: numIn(tpotSlo.input, "TPOT target", 0.01, 10) };
    },
    onStart(params) {
      fillForm({ n_requests: nReq.input, max_new_tokens: newTok.input, spacing_s: spacing.input, mode: mode.input,
        ttft_slo_s: ttftSlo.input, tpot_slo_s: tpotSlo.input }, params); // a resumed run's own settings
      runNo += 1;
      state = { params, t: [0], n: [0], reqs: [] };
      requests.querySelector("tbody").replaceChildren();
      for (const k of ["mode", "throughput", "goodput", "ttft", "tpot", "itl", "wall"]) out.set(k, "–");
      if (Plotly) { Plotly.react(tokens.chart, [], tokensLayout()); Plotly.react(timeline.chart, [], timelineLayout()); }
    },
    onEvent(ev) {
      if (ev.type === "load_step") {
        state.t.push(ev.t_s);
        state.n.push(ev.tokens_total);
        tokens.summary.textContent = `${ev.tokens_total} tokens after ${fixed(ev.t_s, 1)} s; ${ev.n_running} running, ${ev.n_waiting} waiting.`;
        // New arrays each time: Plotly.react skips redrawing data arrays it has already seen.
        if (Plotly) Plotly.react(tokens.chart, [{ x: [...state.t], y: [...state.n], mode: "lines+markers", line: { shape: "hv" },
          hovertemplate: "%{x:.2f} s: %{y} tokens<extra></extra>" }], tokensLayout());
      } else if (ev.type === "load_request") {
        state.reqs.push(ev);
        requests.querySelector("tbody").append(el("tr", {}, el("td", { text: String(ev.request_id) }), el("td", { style: "text-align:left", text: ev.prompt }),
          el("td", { text: fmtMs(ev.ttft_s) }), el("td", { text: fmtMs(ev.tpot_s) }), el("td", { text: ev.met_slo ? "yes" : "no" }),
          el("td", { style: "text-align:left", text: ev.text })));
        drawTimeline();
      } else if (ev.type === "load_summary") {
        out.set("mode", ev.mode === "batched" ? "Batched" : "Sequential");
        note.textContent = `How the requests ran: ${ev.note}.`;
        out.set("throughput", `${fixed(ev.throughput_tokens_per_s, 2)} tokens/s`);
        out.set("goodput", `${fixed(ev.goodput_requests_per_s, 3)} req/s (of ${fixed(ev.requests_per_s, 3)})`);
        out.set("ttft", `${fmtMs(ev.ttft_p50_s)} / ${fmtMs(ev.ttft_p90_s)}`);
        out.set("tpot", fmtMs(ev.tpot_p50_s));
        out.set("itl", `${fmtMs(ev.itl_p50_s)} / ${fmtMs(ev.itl_p90_s)}`);
        out.set("wall", `${fixed(ev.wall_s, 2)} s`);
        runs.querySelector("tbody").append(el("tr", {}, el("td", { text: String(runNo) }), el("td", { text: ev.mode }),
          el("td", { text: `${ev.n_requests} × ${state.params.max_new_tokens}` }), el("td", { text: fixed(ev.throughput_tokens_per_s, 2) }),
          el("td", { text: fixed(ev.goodput_requests_per_s, 3) }), el("td", { text: fmtMs(ev.ttft_p50_s) }), el("td", { text: fmtMs(ev.tpot_p50_s) })));
      }
    },
  });
  shell.body.append(out.node, note, el("div", { class: "ilab-calc__charts" }, tokens.figure, timeline.figure), requests, runs);
  shell.plotly.then((P) => {
    Plotly = P;
    if (!Plotly) return;
    Plotly.newPlot(tokens.chart, [], tokensLayout(), PLOT_CONFIG);
    Plotly.newPlot(timeline.chart, [], timelineLayout(), PLOT_CONFIG);
  });

  function tokensLayout() {
    return { ...BASE_LAYOUT, title: { text: "Tokens generated over time" }, xaxis: { title: { text: "seconds since the first arrival" } },
      yaxis: { title: { text: "tokens (all requests)" }, rangemode: "tozero" } };
  }
  function timelineLayout() {
    return { ...BASE_LAYOUT, title: { text: "Per request: wait, then decode" }, barmode: "stack",
      xaxis: { title: { text: "seconds" } }, yaxis: { title: { text: "request" }, autorange: "reversed" }, showlegend: false };
  }
  function drawTimeline() {
    const rs = [...state.reqs].sort((a, b) => a.request_id - b.request_id);
    timeline.summary.textContent = rs.map((r) => `request ${r.request_id}: arrived ${fixed(r.arrival_s, 1)} s, first token ` +
      `${fixed(r.first_token_s, 1)} s, done ${fixed(r.end_s, 1)} s`).join("; ") + ".";
    if (!Plotly) return;
    const y = rs.map((r) => `#${r.request_id}`);
    Plotly.react(timeline.chart, [
      { type: "bar", orientation: "h", y, x: rs.map((r) => r.arrival_s), marker: { color: "rgba(0,0,0,0)" }, hoverinfo: "skip" },
      { type: "bar", orientation: "h", y, x: rs.map((r) => r.first_token_s - r.arrival_s), marker: { color: "#bbbbbb" },
        hovertemplate: "%{y}: TTFT %{x:.2f} s<extra></extra>" },
      { type: "bar", orientation: "h", y, x: rs.map((r) => r.end_s - r.first_token_s), marker: { color: "#1f77b4" },
        hovertemplate: "%{y}: decoding %{x:.2f} s<extra></extra>" },
    ], timelineLayout(), PLOT_CONFIG);
  }
  return shell;
}
