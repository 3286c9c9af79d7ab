// Prefill vs decode, timed on the real model: one bar per forward pass (step 0 is the prefill over the
// whole prompt), the cost per token of each phase, and the achieved FLOP/s and bytes/s. Every number comes
// from the run's trace. Its step timeline walks the forward passes on a roofline: each pass a point (FLOP per byte,
// achieved FLOP/s) under the memory and compute roofs this server's worker measured (the run's `machine_roofs`),
// the step's point lit and the caption saying which roof bounds it and by how much (roofline-steps.js).
// Publishes `ilab:measured` so a roofline calculator on the page can plot the run.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, el, fmtMs, numberField, outputs, fixed } from "../calculators/ui.js";
import { attainableFlops, formatDecimal } from "../calculators/formulas.js";
import { demoShell, intIn, promptField } from "./course-demo-kit.js";
import { prefillNote, showWhy, whyNote } from "./run-notes.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";
import { formatBytes, logTicks } from "../units.js";
import { rooflineSteps } from "./roofline-steps.js";

const PREFILL = "#d62728";
const DECODE = "#1f77b4";

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/prefill_decode.py), embedded in the page.
  const sp = specParams(config);
  const prompt = promptField("Prompt", sp.value("prompt"));
  const repeat = numberField("Repeat the prompt", sp.value("repeat_prompt"),
    sp.range("repeat_prompt", { step: 1, help: "more prompt tokens, one prefill" }));
  const newTokens = numberField("New tokens", sp.value("max_new_tokens"), sp.range("max_new_tokens", { step: 1 }));
  const text = el("div", { class: "ilab-calc__text", role: "log", "aria-live": "polite", "aria-label": "Generated text" });
  const out = outputs([["prompt", "Prompt tokens"], ["ttft", "TTFT (prefill)"], ["tpot", "TPOT (mean decode step)"],
    ["itl", "ITL median / max"], ["prefillRate", "Prefill: tokens/s"], ["decodeRate", "Decode: tokens/s"],
    ["prefillFlops", "Prefill achieved FLOP/s"], ["decodeBw", "Decode achieved bytes/s"], ["intensity", "FLOP per byte: prefill / decode"]],
  "Measured on this run");
  const steps = chartBlock("Bar chart: milliseconds for each forward pass; the first bar is the prefill");
  const perToken = chartBlock("Bar chart: milliseconds per token processed, prefill against decode");
  const roofline = chartBlock("Log-log roofline: each forward pass of this run as a point (FLOPs per byte, achieved FLOP per " +
    "second) under this server's measured memory-bandwidth and compute roofs; the timeline's step is lit");
  const rates = chartBlock("Chart: achieved gigabytes per second (bars) and gigaFLOP per second (line) for each forward pass");
  const why = whyNote();
  let Plotly = null;
  let state = null;
  let fromEvent = rooflineSteps();

  /** The roofline at one step: the roofs, every pass up to this one (prefill red, decode blue), this one lit. */
  function drawRoofline(p) {
    roofline.chart.dataset.step = String(p.index);
    if (!Plotly) return;
    const shown = p.points.slice(0, p.index + 1);
    const xs = p.points.map((q) => q.intensity);
    const ys = p.points.map((q) => q.flopsPerS);
    let lo = Math.min(...xs) / 3;
    let hi = Math.max(...xs) * 3;
    const traces = [];
    if (p.roofs) {
      const { bandwidth, peak } = p.roofs;
      const ridge = peak / bandwidth;
      lo = Math.min(lo, ridge / 10);
      hi = Math.max(hi, ridge * 10);
      const rx = [lo, ridge, hi];
      traces.push({ type: "scatter", mode: "lines", name: `roofs: ${formatDecimal(bandwidth, "B/s")}, ${formatDecimal(peak, "FLOP/s")}`,
        x: rx, y: rx.map((x) => attainableFlops(x, peak, bandwidth)), line: { color: "#444", width: 2 },
        hovertemplate: "roof: %{y:.3s}FLOP/s at %{x:.3g} FLOP/byte<extra></extra>" });
      ys.push(peak, lo * bandwidth);
    }
    const passes = (phase, name, color, symbol) => {
      const pts = shown.filter((q) => q.phase === phase);
      return { type: "scatter", mode: "markers", name, x: pts.map((q) => q.intensity), y: pts.map((q) => q.flopsPerS),
        customdata: pts.map((q) => q.step), marker: { color, symbol, size: 8, opacity: 0.55 },
        hovertemplate: "step %{customdata}: %{x:.3g} FLOP/byte, %{y:.3s}FLOP/s<extra></extra>" };
    };
    traces.push(passes("prefill", "prefill", PREFILL, "diamond"), passes("decode", "decode steps", DECODE, "circle"));
    traces.push({ type: "scatter", mode: "markers", name: "this step", x: [p.intensity], y: [p.flopsPerS],
      marker: { color: p.phase === "prefill" ? PREFILL : DECODE, size: 16, symbol: p.phase === "prefill" ? "diamond" : "circle",
        line: { color: "#000", width: 2 } }, hoverinfo: "skip" });
    const yLo = Math.min(...ys) / 2;
    const yHi = Math.max(...ys) * 2;
    Plotly.react(roofline.chart, traces, { ...BASE_LAYOUT, datarevision: p.index,
      title: { text: p.roofs ? "This run on this server's roofline" : "This run's passes (no measured roofs)" },
      xaxis: { title: { text: "FLOPs per byte moved" }, type: "log", range: [Math.log10(lo), Math.log10(hi)], ...logTicks(lo, hi) },
      yaxis: { title: { text: "achieved FLOP/s" }, type: "log", range: [Math.log10(yLo), Math.log10(yHi)], ...logTicks(yLo, yHi) },
      legend: { orientation: "h", y: -0.3 }, margin: { ...BASE_LAYOUT.margin, b: 90 } });
  }

  const shell = demoShell(root, config, {
    title: "Prefill vs decode",
    steps: { fromEvent: (ev) => fromEvent(ev), draw: drawRoofline, picture: roofline.figure },
    fields: [prompt.label, repeat.label, newTokens.label],
    getParams() {
      if (!prompt.input.value.trim()) throw new Error("Enter a prompt first.");
      return { prompt: prompt.input.value, repeat_prompt: intIn(repeat.input, "Repeat", sp.min("repeat_prompt"), sp.max("repeat_prompt")),
        max_new_tokens: intIn(newTokens.input, "New tokens", sp.min("max_new_tokens"), sp.max("max_new_tokens")) };
    },
    onStart(params) {
      fillForm({ prompt: prompt.input, repeat_prompt: repeat.input, max_new_tokens: newTokens.input }, params);
      state = { x: [], y: [], colors: [], gbps: [], gflops: [], nPrompt: 0 };
      fromEvent = rooflineSteps();
      text.replaceChildren();
      for (const k of ["prompt", "ttft", "tpot", "itl", "prefillRate", "decodeRate", "prefillFlops", "decodeBw", "intensity"]) out.set(k, "–");
      steps.summary.textContent = "";
      perToken.summary.textContent = "";
      rates.summary.textContent = "";
      showWhy(why, "");
      if (Plotly) {
        Plotly.react(steps.chart, [], stepLayout());
        Plotly.react(perToken.chart, [], perTokenLayout());
        Plotly.react(rates.chart, [], ratesLayout());
      }
    },
    onEvent(ev) {
      if (ev.type === "run_started") {
        state.nPrompt = ev.prompt_token_ids.length;
        out.set("prompt", String(state.nPrompt));
        text.append(el("span", { style: "color:#666", text: ev.prompt_tokens.join("") }));
      } else if (ev.type === "token") {
        text.append(el("span", { text: ev.text }));
        state.x.push(ev.step);
        state.y.push(ev.step_time_s * 1000);
        state.colors.push(ev.phase === "prefill" ? PREFILL : DECODE);
        state.gbps.push(ev.bytes_moved / ev.step_time_s / 1e9);
        state.gflops.push(ev.flops / ev.step_time_s / 1e9);
        if (ev.phase === "prefill") out.set("ttft", fmtMs(ev.step_time_s));
        if (Plotly) Plotly.react(rates.chart, ratesTraces(), ratesLayout());
        // New arrays each time: Plotly.react skips redrawing data arrays it has already seen.
        if (Plotly) Plotly.react(steps.chart, [{ type: "bar", x: [...state.x], y: [...state.y], marker: { color: [...state.colors] },
          hovertemplate: "step %{x}: %{y:.1f} ms<extra></extra>" }], stepLayout());
      } else if (ev.type === "prefill_decode_summary") {
        showSummary(ev);
      }
    },
  });
  shell.body.append(text, out.node, why, el("div", { class: "ilab-calc__charts" }, roofline.figure, steps.figure, perToken.figure,
    rates.figure));
  shell.plotly.then((P) => {
    Plotly = P;
    if (!Plotly) return;
    Plotly.newPlot(steps.chart, [], stepLayout(), PLOT_CONFIG);
    Plotly.newPlot(perToken.chart, [], perTokenLayout(), PLOT_CONFIG);
    Plotly.newPlot(rates.chart, [], ratesLayout(), PLOT_CONFIG);
    Plotly.newPlot(roofline.chart, [], { ...BASE_LAYOUT, title: { text: "This run on this server's roofline" },
      xaxis: { title: { text: "FLOPs per byte moved" }, type: "log" }, yaxis: { title: { text: "achieved FLOP/s" }, type: "log" } },
    PLOT_CONFIG);
    const tl = shell.timeline; // a run that arrived before Plotly: draw the step the timeline shows
    if (tl && tl.log.current) drawRoofline(tl.log.current);
  });

  /** Bars per phase, one trace each, so every legend swatch is the colour of its bars; the FLOP/s line. */
  function ratesTraces() {
    const phase = (colour) => state.x.map((_, i) => i).filter((i) => state.colors[i] === colour);
    const bars = (name, colour) => {
      const idx = phase(colour);
      return { type: "bar", name, x: idx.map((i) => state.x[i]), y: idx.map((i) => state.gbps[i]), marker: { color: colour },
        hovertemplate: "step %{x}: %{y:.2f} GB/s<extra></extra>" };
    };
    return [bars("GB/s moved, prefill", PREFILL), bars("GB/s moved, decode", DECODE),
      { type: "scatter", mode: "lines+markers", name: "GFLOP/s (right axis)", x: [...state.x], y: [...state.gflops], yaxis: "y2",
        line: { color: "#444" }, marker: { color: "#444" }, hovertemplate: "step %{x}: %{y:.2f} GFLOP/s<extra></extra>" }];
  }

  function ratesLayout() {
    // "overlay": each step has one bar (prefill or decode), centred on its step rather than offset as a group.
    return { ...BASE_LAYOUT, title: { text: "Achieved rates per forward pass" }, showlegend: true, legend: { orientation: "h", y: -0.3 },
      barmode: "overlay",
      xaxis: { title: { text: "step (0 = prefill)" }, tickformat: "d", dtick: 1 },
      yaxis: { title: { text: "GB/s moved" }, rangemode: "tozero" },
      // Its own round ticks: synced to the left axis's grid they read 3.14, 6.28, 9.43.
      yaxis2: { title: { text: "GFLOP/s" }, overlaying: "y", side: "right", rangemode: "tozero", tickmode: "auto", nticks: 6,
        showgrid: false }, margin: { ...BASE_LAYOUT.margin, r: 60 } };
  }

  function stepLayout() {
    return { ...BASE_LAYOUT, title: { text: "Time per forward pass<br><sub>red: prefill · blue: decode</sub>" },
      xaxis: { title: { text: "step (0 = prefill)" }, tickformat: "d", dtick: 1 }, yaxis: { title: { text: "ms" }, rangemode: "tozero" } };
  }
  function perTokenLayout() {
    return { ...BASE_LAYOUT, title: { text: "Cost per token processed" }, yaxis: { title: { text: "ms per token" }, rangemode: "tozero" } };
  }

  function showSummary(s) {
    const itl = [...s.itl_s].sort((a, b) => a - b);
    const median = itl.length ? itl[Math.floor((itl.length - 1) / 2)] : NaN;
    out.set("tpot", fmtMs(s.tpot_s));
    out.set("itl", `${fmtMs(median)} / ${fmtMs(itl[itl.length - 1])}`);
    out.set("prefillRate", fixed(s.prefill_tokens_per_s, 1));
    out.set("decodeRate", fixed(s.decode_tokens_per_s, 2));
    out.set("prefillFlops", formatDecimal(s.prefill_flops_per_s, "FLOP/s"));
    out.set("decodeBw", formatDecimal(s.decode_bytes_per_s, "B/s"));
    out.set("intensity", `${fixed(s.prefill_intensity, 1)} / ${fixed(s.decode_intensity, 2)}`);
    const prefillPer = (s.ttft_s / s.n_prompt_tokens) * 1000;
    const decodePer = s.tpot_s * 1000;
    steps.summary.textContent = `Prefill handled ${s.n_prompt_tokens} prompt tokens in one pass of ${fmtMs(s.ttft_s)}; ` +
      `each of the ${s.n_generated - 1} decode steps took ${fmtMs(s.tpot_s)} on average for a single token.`;
    perToken.summary.textContent = `Per token, prefill cost ${fixed(prefillPer, 2)} ms and decode ${fixed(decodePer, 1)} ms: ` +
      `${fixed(decodePer / prefillPer, 1)}× more per token in decode, because every decode step streams all ` +
      `${formatBytes(s.weight_bytes)} of weights for one token.`;
    showWhy(why, prefillNote(s));
    const lastGbps = state.gbps.slice(1);
    rates.summary.textContent = `Decode moved a median ${formatDecimal(s.decode_bytes_per_s, "B/s")} at ${formatDecimal(s.decode_flops_per_s, "FLOP/s")}; ` +
      `prefill computed at ${formatDecimal(s.prefill_flops_per_s, "FLOP/s")}, ${(s.prefill_flops_per_s / Math.max(s.decode_flops_per_s, 1)).toFixed(1)}× the decode rate` +
      (lastGbps.length ? `, while moving ${formatDecimal(state.gbps[0] * 1e9, "B/s")}.` : ".");
    if (Plotly) Plotly.react(perToken.chart, [{ type: "bar", x: ["prefill (per prompt token)", "decode (per new token)"],
      y: [prefillPer, decodePer], marker: { color: ["#d62728", "#1f77b4"] }, hovertemplate: "%{x}: %{y:.2f} ms<extra></extra>" }], perTokenLayout());
    document.dispatchEvent(new CustomEvent("ilab:measured", { detail: { bandwidth: s.decode_bytes_per_s,
      decodeIntensity: s.decode_intensity, prefillIntensity: s.prefill_intensity, prefillFlops: s.prefill_flops_per_s } }));
  }
  return shell;
}
