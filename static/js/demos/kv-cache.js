// The KV-cache demo: generate with the real engine, watch tokens arrive one by one, the KV cache
// grow (bytes per token, stacked per layer) and the time per step. Running again without the cache
// overlays its climbing per-step cost on the same chart. Every number shown comes from the trace.
// The form, Run/Stop, status line, resume after a reload, replay, share link and runs comparison are the
// shared demo shell's (course-demo-kit.js); this module supplies the fields and draws the events.
//
//   import { mount } from "/static/js/demos/kv-cache.js";
//   mount(rootElement, config)   // config: {demo, params, spec, wsPath, plotlyUrl}

import { BASE_LAYOUT, PLOT_CONFIG, checkField, el, fmtMs, numberField, selectField } from "../calculators/ui.js";
import { demoShell, intIn, promptField } from "./course-demo-kit.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";
import { comparisonBlock } from "./comparison.js";
import { bytesTicks, formatBytes } from "../units.js";

const STYLE_ID = "ilab-kv-cache-style";
const MAX_TIME_TRACES = 4;
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

const CSS = `
.ilab-kv__text { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; white-space: pre-wrap; background: #f6f8fa; padding: .6rem; border-radius: 6px; min-height: 2.5em; }
.ilab-kv__text .p { color: #666; }
.ilab-kv__text .t { background: #dbeafe; border-radius: 2px; }
.ilab-kv__text .t.new { background: #93c5fd; }
.ilab-kv__text .t.is-step { outline: 2px solid #0969da; }
.ilab-kv__metrics { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(150px, 100%), 1fr)); gap: .4rem; margin: .6rem 0; }
.ilab-kv__metrics div { background: #f6f8fa; border-radius: 6px; padding: .35rem .5rem; }
.ilab-kv__metrics dt { font-size: .75rem; color: #555; }
.ilab-kv__metrics dd { margin: 0; font-weight: 600; font-variant-numeric: tabular-nums; }
.ilab-kv__charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(380px, 100%), 1fr)); gap: .75rem; }
.ilab-kv__chart { min-height: 320px; min-width: 0; max-width: 100%; position: relative; }
`;

function injectOwnStyle() {
  if (document.getElementById(STYLE_ID)) return;
  const style = document.createElement("style");
  style.id = STYLE_ID;
  style.textContent = CSS;
  document.head.appendChild(style);
}

const METRICS = [["device", "Device · dtype"], ["layers", "Layers"], ["perToken", "KV bytes per token"],
  ["kvTotal", "KV cache now"], ["tokens", "Tokens (prompt + new)"], ["ttft", "Time to first token"],
  ["tpot", "Time per output token"], ["tps", "Decode tokens/s"], ["lastStep", "Last step"]];

export function mount(root, config = {}) {
  injectOwnStyle();
  const demo = config.demo || "kv-cache";
  config = { ...config, demo };
  // Defaults and limits come from the catalog's spec (demos/catalog/kv_cache.py), embedded in the page.
  const sp = specParams(config);
  const presets = (config.spec && config.spec.presets) || [];

  // --- the fields -------------------------------------------------------------------------------
  const preset = selectField("Preset", [["", "Custom prompt"], ...presets.map((p, i) => [String(i), p.label])], "");
  const maxNew = numberField("Max new tokens", sp.value("max_new_tokens"), sp.range("max_new_tokens", { step: 1 }));
  const useCache = checkField("Use the KV cache", sp.value("use_cache"));
  const prompt = promptField("Prompt", sp.value("prompt"));
  preset.input.addEventListener("change", () => {
    const p = presets[Number(preset.input.value)];
    if (preset.input.value !== "" && p) prompt.input.value = p.prompt;
  });
  prompt.input.addEventListener("input", () => { preset.input.value = ""; });

  // --- the outputs ------------------------------------------------------------------------------
  // role "log" (text that grows token by token): a role that may carry a name, which a bare div may not.
  const textBox = el("div", { class: "ilab-kv__text", role: "log", "aria-live": "polite", "aria-atomic": "false",
    "aria-label": "Generated text", "data-testid": "generated-text" });
  const metrics = el("dl", { class: "ilab-kv__metrics", "aria-label": "Numbers from the trace" });
  const metricCells = {};
  for (const [key, label] of METRICS) {
    const dd = el("dd", { "data-metric": key, text: "–" });
    metrics.append(el("div", {}, el("dt", { text: label }), dd));
    metricCells[key] = dd;
  }
  const setMetric = (k, v) => { metricCells[k].textContent = v; };
  const kvChart = el("div", { class: "ilab-kv__chart ilab-kv__kvchart", role: "img",
    "aria-label": "KV-cache bytes after each token, stacked per layer" });
  const timeChart = el("div", { class: "ilab-kv__chart ilab-kv__timechart", role: "img",
    "aria-label": "Time per step in milliseconds" });
  // One decode step with and without the cache, timed in alternating repeats at the end of every run (comparison.js).
  const cmp = comparisonBlock();

  // --- state and charts -------------------------------------------------------------------------
  let Plotly = null;
  let current = null; // this run: {number, useCache, generated, nPrompt, nLayers, timeTrace, ticks}
  let runCount = 0;
  let timeTraces = 0;

  function onRunStarted(ev) {
    const c = current;
    c.nLayers = ev.n_layers;
    c.nPrompt = ev.prompt_token_ids.length;
    setMetric("device", `${ev.device} · ${ev.dtype}`);
    setMetric("layers", String(ev.n_layers));
    setMetric("perToken", formatBytes(ev.kv_bytes_per_token));
    setMetric("tokens", `${c.nPrompt} + 0`);
    textBox.replaceChildren(el("span", { class: "p", text: ev.prompt_tokens.join("") }));
    if (!Plotly) return;
    // One stacked trace per layer; the cache-less run stores nothing (flat zero). Its axis reads in the binary
    // unit of the cache so far, as the cards do ("450 KiB" on a card is 450 KiB on the axis), rescaled as it grows.
    c.ticks = "";
    const traces = [];
    for (let i = 0; i < ev.n_layers; i += 1) {
      const hue = Math.round((i / ev.n_layers) * 260);
      traces.push({ x: [], y: [], name: `layer ${i}`, type: "scatter", mode: "lines", stackgroup: "kv",
        line: { width: 0.5, color: `hsl(${hue},65%,45%)` },
        text: [], hovertemplate: `layer ${i}: %{text}<extra></extra>` });
    }
    const note = c.useCache ? [] : [{ text: "Cache off: nothing kept;<br>K and V recomputed every step",
      xref: "paper", yref: "paper", x: 0.5, y: 0.6, showarrow: false, font: { size: 13, color: "#b00020" } }];
    Plotly.react(kvChart, traces, { ...kvChart.layout, annotations: note,
      title: { text: `KV cache size, stacked by layer (${ev.n_layers})` } });
    if (timeTraces >= MAX_TIME_TRACES) { Plotly.deleteTraces(timeChart, 0); timeTraces -= 1; }
    Plotly.addTraces(timeChart, { x: [], y: [], type: "scatter", mode: "lines+markers",
      name: `run ${c.number}: cache ${c.useCache ? "on" : "off"}`, line: { color: COLORS[(c.number - 1) % COLORS.length] },
      hovertemplate: "step %{x}: %{y:.1f} ms<extra></extra>" });
    timeTraces += 1;
    c.timeTrace = timeTraces - 1;
  }

  function onToken(ev) {
    const c = current;
    c.generated += 1;
    const prev = textBox.querySelector(".t.new");
    if (prev) prev.classList.remove("new");
    textBox.append(el("span", { class: "t new", text: ev.text, title: `token ${ev.token_id} at position ${ev.position}` }));
    setMetric("kvTotal", formatBytes(ev.kv_bytes_total));
    setMetric("tokens", `${c.nPrompt} + ${c.generated}`);
    setMetric("lastStep", `${fmtMs(ev.step_time_s)} (${ev.phase}, ${ev.n_input_tokens ?? "?"} in)`);
    if (ev.step === 0) setMetric("ttft", fmtMs(ev.step_time_s));
    if (!Plotly) return;
    const layers = ev.kv_bytes_per_layer || [];
    const idx = layers.map((_, i) => i);
    // What each layer's cache holds after this token; stacked, the top is kv_bytes_total.
    Plotly.extendTraces(kvChart, { x: layers.map(() => [ev.position]), y: layers.map((b) => [b]),
      text: layers.map((b) => [formatBytes(b)]) }, idx);
    const ticks = bytesTicks(ev.kv_bytes_total * 1.05);
    if (ev.kv_bytes_total > 0 && JSON.stringify(ticks.tickvals) !== c.ticks) {
      c.ticks = JSON.stringify(ticks.tickvals);
      Plotly.relayout(kvChart, Object.fromEntries(Object.entries(ticks).map(([k, v]) => [`yaxis.${k}`, v])));
    }
    Plotly.extendTraces(timeChart, { x: [[ev.step]], y: [[ev.step_time_s * 1000]] }, [c.timeTrace]);
  }

  function onFinished(ev) {
    setMetric("ttft", fmtMs(ev.ttft_s));
    setMetric("tpot", fmtMs(ev.tpot_s));
    setMetric("tps", Number.isFinite(ev.tokens_per_s) ? ev.tokens_per_s.toFixed(1) : "–");
    setMetric("kvTotal", formatBytes(ev.kv_bytes));
  }

  const shell = demoShell(root, config, {
    title: "KV cache demo",
    fields: [preset.label, maxNew.label, useCache.label, prompt.label],
    getParams() {
      if (!prompt.input.value.trim()) { prompt.input.focus(); throw new Error("Enter a prompt first."); }
      return { prompt: prompt.input.value,
        max_new_tokens: intIn(maxNew.input, "Max new tokens", sp.min("max_new_tokens"), sp.max("max_new_tokens")),
        use_cache: useCache.input.checked, temperature: sp.value("temperature") };
    },
    onStart(params) {
      // A run resumed after a reload, or a shared run, shows the settings it ran with.
      fillForm({ prompt: prompt.input, max_new_tokens: maxNew.input, use_cache: useCache.input }, params);
      runCount += 1;
      current = { number: runCount, useCache: params.use_cache !== false, generated: 0, nPrompt: 0 };
      for (const k of ["ttft", "tpot", "tps", "kvTotal", "lastStep"]) setMetric(k, "–");
      cmp.reset();
    },
    onEvent(ev) {
      cmp.onEvent(ev);
      if (ev.type === "run_started") onRunStarted(ev);
      else if (ev.type === "token") onToken(ev);
      else if (ev.type === "run_finished") onFinished(ev);
    },
    // A minimal step timeline (one step per token: the text so far, the cache it fills), so a lesson's narration
    // can move through a run; the mechanism's own picture per step can replace `draw`.
    steps: {
      fromEvent(ev) {
        if (ev.type !== "token") return null;
        return { caption: `Step ${ev.step} (${ev.phase}): token “${ev.text}” at position ${ev.position}; `
          + `the cache now holds ${formatBytes(ev.kv_bytes_total)}.` };
      },
      draw(step, index) {
        const marked = textBox.querySelector(".t.is-step");
        if (marked) marked.classList.remove("is-step");
        const token = textBox.querySelectorAll(".t")[index];
        if (token) token.classList.add("is-step");
      },
    },
    onDone(frame) {
      if (frame.run_id === null) return; // a shared run: the shell says so
      const s = frame.summary || {};
      const how = frame.status === "cancelled" ? "Stopped" : "Done";
      const n = s.n_generated ?? (current ? current.generated : 0);
      const replayed = frame.replayed_from ? " Replayed from a previous run (no worker needed)." : "";
      shell.setStatus(`${how}: ${n} tokens${s.finish_reason ? ` (${s.finish_reason})` : ""}.${replayed}`);
    },
  });
  shell.body.append(textBox, metrics, el("div", { class: "ilab-kv__charts" }, kvChart, timeChart), cmp.node);

  shell.plotly.then((P) => {
    if (!P) return;
    Plotly = P;
    const base = { ...BASE_LAYOUT, margin: { l: 60, r: 10, t: 56, b: 45 } };
    Plotly.newPlot(kvChart, [], {
      ...base, title: { text: "KV cache size, stacked by layer" },
      xaxis: { title: { text: "token position" } }, yaxis: { title: { text: "KV cache" }, rangemode: "tozero" },
      showlegend: false,
    }, PLOT_CONFIG);
    Plotly.newPlot(timeChart, [], {
      ...base, title: { text: "Time per step" },
      xaxis: { title: { text: "step (0 = prefill)" } }, yaxis: { title: { text: "ms" }, rangemode: "tozero" },
      legend: { orientation: "h", y: -0.25 },
    }, PLOT_CONFIG);
  });

  const api = { run: shell.run, stop: () => root.querySelector(".ilab-stop").click(), socket: shell.socket };
  root.ilabDemo = api; // for debugging and tests
  return api;
}
