// The KV-cache demo: generate with the real engine, watch tokens arrive one by one, the KV cache
// grow (bytes per token, stacked per layer) and the time per step. Running again without the cache
// overlays its climbing per-step cost on the same chart. Every number shown comes from the trace.
//
//   import { mount } from "/static/js/demos/kv-cache.js";
//   mount(rootElement, config)   // config: {demo, params, spec, wsPath, plotlyUrl}

import { forgetRun, getSocket, queueText, rememberRun, runKey, storedRun } from "../ws-client.js";
import { BASE_LAYOUT, PLOT_CONFIG, ensurePlotly, injectStyle as injectSharedStyle } from "../calculators/ui.js";
import { errorText } from "./course-demo-kit.js";
import { compareMetrics } from "./compare-metrics.js";
import { fetchSharedRun, runExtras, sharedRunUrl } from "./run-history.js";
import { specParams } from "./spec-params.js";
import { comparisonBlock } from "./comparison.js";
import { bytesTicks, formatBytes } from "../units.js";

const STYLE_ID = "ilab-kv-cache-style";
const MAX_TIME_TRACES = 4;
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

const CSS = `
.ilab-kv { border: 1px solid #d0d7de; border-radius: 8px; padding: 1rem; background: #fff; margin: 1rem 0; }
.ilab-kv form { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(200px, 100%), 1fr)); gap: .75rem; align-items: end; }
.ilab-kv label { display: flex; flex-direction: column; gap: .25rem; font-weight: 600; font-size: .9rem; }
.ilab-kv label.ilab-kv__check { flex-direction: row; align-items: center; gap: .5rem; }
.ilab-kv textarea { grid-column: 1 / -1; min-height: 3.2rem; font: inherit; padding: .4rem; }
.ilab-kv .ilab-kv__prompt { grid-column: 1 / -1; }
.ilab-kv input[type=number], .ilab-kv select { font: inherit; padding: .3rem; }
.ilab-kv .ilab-kv__buttons { display: flex; gap: .5rem; }
.ilab-kv__status { margin: .6rem 0; min-height: 1.3em; color: #444; }
.ilab-kv__status.is-error { color: #b00020; font-weight: 600; }
.ilab-kv__replay { display: inline-block; background: #fff3cd; border: 1px solid #e0c36c; border-radius: 4px; padding: 0 .4rem; margin-left: .4rem; }
.ilab-kv__text { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; white-space: pre-wrap; background: #f6f8fa; padding: .6rem; border-radius: 6px; min-height: 2.5em; }
.ilab-kv__text .p { color: #666; }
.ilab-kv__text .t { background: #dbeafe; border-radius: 2px; }
.ilab-kv__text .t.new { background: #93c5fd; }
.ilab-kv__metrics { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(150px, 100%), 1fr)); gap: .4rem; margin: .6rem 0; }
.ilab-kv__metrics div { background: #f6f8fa; border-radius: 6px; padding: .35rem .5rem; }
.ilab-kv__metrics dt { font-size: .75rem; color: #555; }
.ilab-kv__metrics dd { margin: 0; font-weight: 600; font-variant-numeric: tabular-nums; }
.ilab-kv__charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(380px, 100%), 1fr)); gap: .75rem; }
.ilab-kv__chart { min-height: 320px; min-width: 0; max-width: 100%; position: relative; }
`;

function injectStyle() {
  if (document.getElementById(STYLE_ID)) return;
  const style = document.createElement("style");
  style.id = STYLE_ID;
  style.textContent = CSS;
  document.head.appendChild(style);
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === null || v === undefined) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) node.append(c);
  return node;
}

const fmtMs = (s) => (Number.isFinite(s) ? `${(s * 1000).toFixed(1)} ms` : "–");

let instance = 0;

export function mount(root, config = {}) {
  injectSharedStyle(); // Run/Stop look the same in every demo
  injectStyle();
  instance += 1;
  const id = `ilabkv${instance}`;
  // Defaults and limits come from the catalog's spec (demos/catalog/kv_cache.py), embedded in the page.
  const spec = config.spec || { params: {} };
  const sp = specParams(config);
  const minTokens = sp.min("max_new_tokens");
  const maxTokens = sp.max("max_new_tokens");
  const presets = spec.presets || [];
  const socket = getSocket(config.wsPath || "/ws/demos/");

  // --- the form ---------------------------------------------------------------------------
  const presetSel = el("select", { id: `${id}-preset` },
    el("option", { value: "", text: "Custom prompt" }),
    ...presets.map((p, i) => el("option", { value: String(i), text: p.label })));
  const prompt = el("textarea", { id: `${id}-prompt`, name: "prompt", rows: "2", required: true });
  prompt.value = sp.value("prompt");
  const maxNew = el("input", { id: `${id}-max`, name: "max_new_tokens", type: "number", min: String(minTokens),
    max: String(maxTokens), step: "1", required: true, value: String(sp.value("max_new_tokens")) });
  const useCache = el("input", { id: `${id}-cache`, name: "use_cache", type: "checkbox" });
  useCache.checked = sp.value("use_cache");
  const runBtn = el("button", { type: "submit", class: "ilab-run ilab-kv__run", text: "Run" });
  const stopBtn = el("button", { type: "button", class: "ilab-stop ilab-kv__stop", text: "Stop", disabled: true });
  const key = runKey(root, config.demo || "kv-cache");

  // Replay choice, provenance line, share link and the runs comparison (run-history.js).
  const extras = runExtras(root, config, { metrics: compareMetrics(config.demo || "kv-cache"), checkClass: "ilab-kv__check" });
  const form = el("form", { "aria-label": "KV cache demo settings" },
    el("label", { for: `${id}-preset` }, "Preset", presetSel),
    el("label", { for: `${id}-max` }, "Max new tokens", maxNew),
    el("label", { for: `${id}-cache`, class: "ilab-kv__check" }, useCache, "Use the KV cache"),
    extras.replayChoice,
    el("div", { class: "ilab-kv__buttons" }, runBtn, stopBtn),
    el("label", { for: `${id}-prompt`, class: "ilab-kv__prompt" }, "Prompt (Ctrl+Enter runs)", prompt));

  const status = el("p", { class: "ilab-kv__status", role: "status", "aria-live": "polite" });
  // role "log" (text that grows token by token): a role that may carry a name, which a bare div may not.
  const textBox = el("div", { class: "ilab-kv__text", role: "log", "aria-live": "polite", "aria-atomic": "false",
    "aria-label": "Generated text", "data-testid": "generated-text" });
  const metrics = el("dl", { class: "ilab-kv__metrics", "aria-label": "Numbers from the trace" });
  const kvChart = el("div", { class: "ilab-kv__chart ilab-kv__kvchart", role: "img",
    "aria-label": "KV-cache bytes after each token, stacked per layer" });
  const timeChart = el("div", { class: "ilab-kv__chart ilab-kv__timechart", role: "img",
    "aria-label": "Time per step in milliseconds" });
  // One decode step with and without the cache, timed in alternating repeats at the end of every run (comparison.js).
  const cmp = comparisonBlock();
  const wrap = el("div", { class: "ilab-kv" }, form, status, extras.provenance, extras.share, textBox, metrics,
    el("div", { class: "ilab-kv__charts" }, kvChart, timeChart), cmp.node, extras.panel);
  root.append(wrap);

  const metricCells = {};
  for (const [key, label] of [["device", "Device · dtype"], ["layers", "Layers"], ["perToken", "KV bytes per token"],
    ["kvTotal", "KV cache now"], ["tokens", "Tokens (prompt + new)"], ["ttft", "Time to first token"],
    ["tpot", "Time per output token"], ["tps", "Decode tokens/s"], ["lastStep", "Last step"]]) {
    const dd = el("dd", { "data-metric": key, text: "–" });
    metrics.append(el("div", {}, el("dt", { text: label }), dd));
    metricCells[key] = dd;
  }
  const setMetric = (k, v) => { metricCells[k].textContent = v; };

  presetSel.addEventListener("change", () => {
    const p = presets[Number(presetSel.value)];
    if (presetSel.value !== "" && p) prompt.value = p.prompt;
  });
  prompt.addEventListener("input", () => { presetSel.value = ""; });
  prompt.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
  });

  // --- state and charts -----------------------------------------------------------------------
  let Plotly = null;
  let current = null; // {handle, timeTrace, nLayers, kvInit, ...}
  let runCount = 0;
  let timeTraces = 0;
  const plotReady = ensurePlotly(config.plotlyUrl).then((P) => {
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
  }).catch((err) => setStatus(`Charts unavailable: ${err.message}`, true));

  function setStatus(msg, isError = false, replayed = false) {
    status.textContent = msg;
    status.classList.toggle("is-error", isError);
    if (replayed) status.append(el("span", { class: "ilab-kv__replay", text: "replayed from a previous run" }));
  }

  function setRunning(running) {
    runBtn.disabled = running;
    stopBtn.disabled = !running;
    root.dataset.state = running ? "running" : "idle";
  }

  function onRunStarted(ev) {
    const c = current;
    c.nLayers = ev.n_layers;
    c.perToken = ev.kv_bytes_per_token;
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

  async function run() {
    const params = {
      prompt: prompt.value,
      max_new_tokens: Number(maxNew.value),
      use_cache: useCache.checked,
      temperature: sp.value("temperature"),
    };
    if (!params.prompt.trim()) { setStatus("Enter a prompt first.", true); prompt.focus(); return; }
    if (!Number.isInteger(params.max_new_tokens) || params.max_new_tokens < minTokens || params.max_new_tokens > maxTokens) {
      setStatus(`Max new tokens must be between ${minTokens} and ${maxTokens}.`, true); maxNew.focus(); return;
    }
    await plotReady;
    follow(params, null);
  }

  /** Start a run, or (runId given) resume one started before the page reloaded. */
  function follow(params, runId) {
    runCount += 1;
    current = { number: runCount, useCache: params.use_cache, generated: 0, nPrompt: 0, replayed: false };
    const c = current;
    for (const k of ["ttft", "tpot", "tps", "kvTotal", "lastStep"]) setMetric(k, "–");
    setRunning(true);
    setStatus(runId ? "Picking up the run you started before the page reloaded…" : "Queued…");
    const options = runId ? {} : extras.startOptions();
    extras.onStart();
    cmp.reset();
    const handlers = {
      onAccepted(frame) {
        c.replayed = Boolean(frame.replayed_from);
        root.dataset.runId = frame.run_id;
        rememberRun(key, frame.run_id, params);
        extras.onAccepted(frame);
        setStatus(c.replayed ? "Replaying" : "Running…", false, c.replayed);
      },
      onHeader(frame) { if (current === c) extras.onHeader(frame); },
      onQueued(frame) { if (current === c) { c.interrupted = true; setStatus(queueText(frame)); } },
      onResumed(frame) {
        if (current === c) extras.onResumed(frame);
        c.interrupted = true; setStatus("Reconnected; catching up…", false, c.replayed);
      },
      onEvent(ev) {
        if (current !== c) return;
        extras.onEvent(ev);
        cmp.onEvent(ev);
        if (c.interrupted) { c.interrupted = false; setStatus(c.replayed ? "Replaying" : "Running…", false, c.replayed); }
        if (ev.type === "run_started") onRunStarted(ev);
        else if (ev.type === "token") onToken(ev);
        else if (ev.type === "run_finished") onFinished(ev);
      },
      onDone(frame) {
        forgetRun(key);
        if (current !== c) return;
        setRunning(false);
        const s = frame.summary || {};
        const how = frame.status === "cancelled" ? "Stopped" : "Done";
        const n = s.n_generated ?? c.generated;
        setStatus(`${how}: ${n} tokens${s.finish_reason ? ` (${s.finish_reason})` : ""}.`, false,
          Boolean(frame.replayed_from));
        root.dataset.state = frame.status === "cancelled" ? "cancelled" : "done";
        extras.onDone(frame, params);
      },
      onError(frame) {
        forgetRun(key);
        if (current !== c) return;
        setRunning(false);
        if (runId && frame.code === "not_found") { // e.g. signed out since: that run is not this visitor's
          setStatus("The run from before the reload is no longer available: run the demo again.");
          root.dataset.state = "idle";
          return;
        }
        setStatus(`Error: ${errorText(frame)}`, true);
        root.dataset.state = "error";
        let left = Math.ceil(frame.retry_after || 0);
        const timer = left > 0 ? setInterval(() => {
          left -= 1;
          if (current !== c || root.dataset.state !== "error") clearInterval(timer);
          else if (left <= 0) { clearInterval(timer); setStatus("Ready: you can run the demo again."); }
          else setStatus(`Error: ${errorText({ ...frame, retry_after: left })}`, true);
        }, 1000) : null;
      },
    };
    if (runId) {
      root.dataset.runId = runId;
      c.handle = socket.resume(runId, handlers);
    } else {
      c.handle = socket.start(config.demo || "kv-cache", params, handlers, options);
    }
  }

  form.addEventListener("submit", (e) => { e.preventDefault(); run(); });
  stopBtn.addEventListener("click", () => {
    if (current && current.handle) { current.handle.cancel(); setStatus("Stopping…"); }
  });
  socket.onState((state, detail) => {
    if (state === "reconnecting" && root.dataset.state === "running") {
      if (current) current.interrupted = true;
      setStatus(`Connection lost; reconnecting (attempt ${detail.attempt})…`, true);
    }
  });
  socket.connect();
  setRunning(false);
  const stored = storedRun(key);
  if (stored) {
    const p = stored.params || {};
    if (typeof p.prompt === "string") prompt.value = p.prompt;
    if (p.max_new_tokens) maxNew.value = String(p.max_new_tokens);
    if (typeof p.use_cache === "boolean") useCache.checked = p.use_cache;
    plotReady.then(() => follow(p, stored.runId));
  } else if (sharedRunUrl(root, config)) {
    plotReady.then(() => showShared(sharedRunUrl(root, config)));
  }

  /** Draw a finished run from its stored trace (a share link): no socket, no model. Read-only on its share
   * page (the form is disabled); on a lesson (?run=) the student can still run the demo. */
  async function showShared(url) {
    const readOnly = Boolean(config.sharedRun);
    if (readOnly) for (const node of form.elements) node.disabled = true;
    setStatus("Loading the shared run…");
    let data;
    try {
      data = await fetchSharedRun(url);
    } catch (err) {
      setStatus(`Could not open the shared run: ${err.message}.`, true);
      root.dataset.state = "error";
      return;
    }
    if (data.demo !== (config.demo || "kv-cache") || current) { if (!current) setStatus(""); return; }
    const p = data.params || {};
    if (typeof p.prompt === "string") prompt.value = p.prompt;
    if (p.max_new_tokens) maxNew.value = String(p.max_new_tokens);
    if (typeof p.use_cache === "boolean") useCache.checked = p.use_cache;
    runCount += 1;
    current = { number: runCount, useCache: p.use_cache !== false, generated: 0, nPrompt: 0, replayed: false, shared: true };
    extras.onStart();
    cmp.reset();
    for (const ev of data.events || []) {
      cmp.onEvent(ev);
      if (ev.type === "run_started") onRunStarted(ev);
      else if (ev.type === "token") onToken(ev);
      else if (ev.type === "run_finished") onFinished(ev);
    }
    extras.showShared(data);
    setStatus(readOnly ? "A shared run, redrawn from its stored trace (read-only)."
      : "A shared run, redrawn from its stored trace: run the demo to make your own.");
    root.dataset.state = "shared";
    root.dataset.sharedRun = data.share_id;
  }
  const api = { run, stop: () => stopBtn.click(), socket };
  root.ilabDemo = api; // for debugging and tests
  return api;
}
