// The KV-cache demo: generate with the real engine, watch tokens arrive one by one and the KV cache fill as a
// layers × positions grid of K and V, one column per token (the prompt's columns at once in the prefill), beside
// what the cache holds against what a cache-less run recomputes, and the time per step. Its step timeline replays
// the run forward by forward (kv-cache-steps.js turns the events into steps). Running again without the cache
// overlays its climbing per-step cost on the time chart. Every number shown comes from the trace.
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
import { gridRow, kvSteps } from "./kv-cache-steps.js";

const STYLE_ID = "ilab-kv-cache-style";
const MAX_TIME_TRACES = 4;
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];
// Grid cells: [held in the cache, computed by this forward]; K in blues, V in oranges.
const K_COLORS = ["#93c5fd", "#1d4ed8"];
const V_COLORS = ["#fdba74", "#c2410c"];
const MAX_TICK_LABELS = 32;
/** A token on the position axis: newlines visible, at most 10 characters. */
const tokenLabel = (text) => String(text).replace(/\n/g, "↵").slice(0, 10);
const steppedScale = ([held, fresh]) => [[0, held], [0.5, held], [0.5, fresh], [1, fresh]];

const CSS = `
.ilab-kv__text { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; white-space: pre-wrap; background: #f6f8fa; padding: .6rem; border-radius: 6px; min-height: 2.5em; }
.ilab-kv__text .p { color: #666; }
.ilab-kv__text .t { background: #dbeafe; border-radius: 2px; }
.ilab-kv__text .t.new { background: #93c5fd; }
.ilab-kv__text .t.cur { outline: 2px solid #1d4ed8; }
.ilab-kv__overlaid { position: relative; }
.ilab-kv__box { position: absolute; left: 0; top: 0; width: 0; height: 0; pointer-events: none; }
.ilab-kv__key { font-size: .8rem; color: #444; margin: .2rem 0 0; }
.ilab-kv__key span { display: inline-block; width: .8em; height: .8em; vertical-align: -.1em; margin: 0 .2em 0 .6em; }
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

// kvTotal, tokens and lastStep describe the step the timeline shows (drawStep sets them); the rest, the run.
const METRICS = [["device", "Device · dtype"], ["layers", "Layers"], ["perToken", "KV bytes per token"],
  ["kvTotal", "KV cache at this step"], ["tokens", "Tokens (prompt + new)"], ["ttft", "Time to first token"],
  ["tpot", "Time per output token"], ["tps", "Decode tokens/s"], ["lastStep", "This step"]];

/** Boxes laid over a Plotly chart's plot area, spanning data x from x0 to x1 (the full plot height; `below` also
 * covers the x tick labels under it). `node` holds the chart and its boxes; `place(name, x0, x1)` moves one and
 * records the span in its data-x0 / data-x1 (what tests read). */
function overlays(gd, boxes) {
  const node = el("div", { class: "ilab-kv__overlaid" }, gd);
  const made = {};
  for (const [name, { cls, style, below }] of Object.entries(boxes)) {
    made[name] = { box: el("div", { class: `ilab-kv__box ${cls}`, style, "aria-hidden": "true" }), below };
    node.append(made[name].box);
  }
  function place(name, x0, x1) {
    const { box, below } = made[name];
    box.dataset.x0 = String(x0);
    box.dataset.x1 = String(x1);
    const full = gd._fullLayout;
    if (!full || !full.xaxis || !full._size) return;
    const ax = full.xaxis;
    const size = full._size;
    const [lo, hi] = ax.range;
    const left = ax.l2p(Math.max(lo, Math.min(hi, x0)));
    const width = Math.max(0, ax.l2p(Math.max(lo, Math.min(hi, x1))) - left);
    const top = below ? size.t + size.h + 1 : size.t;
    const height = below ? Math.max(0, size.b - 22) : size.h;
    box.style.transform = `translate(${size.l + left}px, ${top}px)`;
    box.style.width = `${width}px`;
    box.style.height = `${height}px`;
  }
  return { node, place };
}

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
  const grid = el("div", { class: "ilab-kv__chart ilab-kv__grid", role: "img",
    "aria-label": "The KV cache as a grid: one row per layer for K and for V, one column per token position" });
  const key = el("p", { class: "ilab-kv__key" }, el("span", { style: `background:${K_COLORS[1]}` }), "computed by this forward",
    el("span", { style: `background:${K_COLORS[0]}` }), "held in the cache, read by it",
    el("span", { style: "background:#eef0f3;border:1px solid #ccc" }), "no K/V yet (K blue, V orange)");
  const kvChart = el("div", { class: "ilab-kv__chart ilab-kv__kvchart", role: "img",
    "aria-label": "Bytes of K and V computed so far: once with the cache, again at every step without it" });
  const gridOverlay = overlays(grid, {
    fresh: { cls: "ilab-kv__fresh", style: "background:rgba(15,23,42,.45)" },
    empty: { cls: "ilab-kv__empty", style: "background:#eef0f3" },
    emptyLabels: { cls: "ilab-kv__empty-labels", style: "background:#fff", below: true },
  });
  const bytesOverlay = overlays(kvChart, {
    later: { cls: "ilab-kv__later", style: "background:rgba(255,255,255,.8)" },
    now: { cls: "ilab-kv__now", style: "background:#111;min-width:2px" },
  });
  const timeChart = el("div", { class: "ilab-kv__chart ilab-kv__timechart", role: "img",
    "aria-label": "Time per step in milliseconds" });
  // One decode step with and without the cache, timed in alternating repeats at the end of every run (comparison.js).
  const cmp = comparisonBlock();

  // --- state and charts -------------------------------------------------------------------------
  let Plotly = null;
  let current = null; // this run: {number, useCache, generated, nPrompt, nLayers, timeTrace}
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
    textBox.append(el("span", { class: "t new", text: ev.text, title: `token ${ev.token_id} at position ${ev.position}`,
      "data-step": String(ev.step) }));
    if (ev.step === 0) setMetric("ttft", fmtMs(ev.step_time_s));
    if (!Plotly) return;
    Plotly.extendTraces(timeChart, { x: [[ev.step]], y: [[ev.step_time_s * 1000]] }, [c.timeTrace]);
  }

  function onFinished(ev) {
    setMetric("ttft", fmtMs(ev.ttft_s));
    setMetric("tpot", fmtMs(ev.tpot_s));
    setMetric("tps", Number.isFinite(ev.tokens_per_s) ? ev.tokens_per_s.toFixed(1) : "–");
  }

  // --- the step timeline: one step per forward pass (kv-cache-steps.js), drawn on the grid and the bytes chart ---
  let fromEvent = kvSteps();
  let gridRun = null; // the run whose grid layout is on the chart (its layout changes only with the run)

  function gridLayout(run) {
    const axis = (domain, name) => ({ domain, range: [-0.5, run.nLayers - 0.5], title: { text: name }, zeroline: false,
      fixedrange: true, showticklabels: false, showgrid: false });
    return { ...BASE_LAYOUT, margin: { l: 60, r: 10, t: 56, b: 70 }, showlegend: false,
      title: { text: `KV cache: ${run.nLayers} layers × positions, K and V` }, plot_bgcolor: "#eef0f3",
      xaxis: { anchor: "y2", range: [-0.5, run.capacity - 0.5], title: { text: "position (token)" }, tickangle: -60, zeroline: false,
        showgrid: false, fixedrange: true, tickmode: "array", tickvals: [], ticktext: [] },
      yaxis: axis([0.53, 1], `K (${run.nLayers} layers)`), yaxis2: axis([0, 0.47], "V") };
  }

  // Scrubbing redraws nothing in Plotly: each chart is drawn once per run (and again as a live run's steps arrive)
  // with the whole run, and the step shown is a few boxes laid over it (overlays below): what is not computed yet
  // masked, this forward's columns darkened, the bytes chart's later steps veiled. Moving a box costs a style change,
  // where a Plotly redraw of the grid costs tens of milliseconds on a busy 2-core machine.
  let drawnSteps = null; // the steps array and its length the charts were last drawn with

  function drawRun(steps) {
    const last = steps[steps.length - 1];
    const run = last.run;
    // Every cell of the run: which are shown as held, computed or not yet, is the overlays' job.
    const z = new Array(run.nLayers).fill(new Array(run.capacity).fill(1));
    const heat = (name, colors, yaxis) => ({ type: "heatmap", name, z, zmin: 1, zmax: 2, colorscale: steppedScale(colors),
      showscale: false, yaxis, ygap: 1, hovertemplate: `${name}, layer %{y}, position %{x}<extra></extra>` });
    const every = Math.max(1, Math.ceil(run.capacity / MAX_TICK_LABELS));
    const tickvals = [];
    for (let i = 0; i < last.written[1]; i += every) tickvals.push(i);
    const layout = run === gridRun ? grid.layout : gridLayout(run);
    gridRun = run;
    Plotly.react(grid, [heat("K", K_COLORS, "y"), heat("V", V_COLORS, "y2")], { ...layout,
      xaxis: { ...layout.xaxis, tickvals, ticktext: tickvals.map((i) => tokenLabel(run.tokens[i])) } });

    // Fixed axes for the whole run; ticks in the cards' binary unit.
    const top = last.withoutCacheBytes * 1.05;
    const x = steps.map((st) => st.step);
    const line = (name, color, key, dash) => ({ type: "scatter", mode: "lines+markers", name, x, y: steps.map((st) => st[key]),
      line: { color, dash }, marker: { size: 5, color }, text: steps.map((st) => formatBytes(st[key])),
      hovertemplate: `${name}, step %{x}: %{text}<extra></extra>` });
    const maxStep = Math.max(run.capacity - run.nPrompt, last.step);
    Plotly.react(kvChart, [line("with the cache: computed once = held", "#1d4ed8", "withCacheBytes"),
      line("without the cache: recomputed every step", "#b00020", "withoutCacheBytes", "dot")], {
      ...kvChart.layout, title: { text: "K/V computed so far: once with the cache, every step again without" },
      xaxis: { ...kvChart.layout.xaxis, range: [-0.5, maxStep + 0.5] },
      yaxis: { ...kvChart.layout.yaxis, range: [0, top], autorange: false, ...bytesTicks(top) } });
    drawnSteps = { steps, n: steps.length };
  }

  let shown = null; // the step the overlays show
  function placeOverlays() {
    if (!shown) return;
    const [from, to] = shown.written;
    const cap = shown.run.capacity;
    gridOverlay.place("fresh", from - 0.5, to - 0.5);
    gridOverlay.place("empty", to - 0.5, cap - 0.5);
    gridOverlay.place("emptyLabels", to - 0.5, cap - 0.5);
    const end = kvChart._fullLayout ? kvChart._fullLayout.xaxis.range[1] : shown.step + 1;
    bytesOverlay.place("later", shown.step + 0.5, end);
    bytesOverlay.place("now", shown.step - 0.02, shown.step + 0.02);
  }

  function drawStep(step, index, steps) {
    const cur = textBox.querySelector(".t.cur");
    if (cur) cur.classList.remove("cur");
    const made = textBox.querySelector(`.t[data-step="${step.step}"]`);
    if (made) made.classList.add("cur");
    shown = step;
    // The step's cards, from the same step as the picture (a finished run's last step shows the run's end state).
    setMetric("kvTotal", formatBytes(step.heldBytes));
    setMetric("tokens", `${step.run.nPrompt} + ${step.generated}`);
    setMetric("lastStep", `${fmtMs(step.stepTimeS)} (${step.phase}, ${step.nInputs ?? "?"} in)`);
    if (!Plotly) return;
    if (!drawnSteps || drawnSteps.steps !== steps || drawnSteps.n !== steps.length) drawRun(steps);
    placeOverlays();
  }

  const shell = demoShell(root, config, {
    title: "KV cache demo",
    steps: { fromEvent: (ev) => fromEvent(ev), draw: drawStep, picture: () => grid.closest(".ilab-kv__charts") },
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
      fromEvent = kvSteps();
    },
    onEvent(ev) {
      cmp.onEvent(ev);
      if (ev.type === "run_started") onRunStarted(ev);
      else if (ev.type === "token") onToken(ev);
      else if (ev.type === "run_finished") onFinished(ev);
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
  shell.body.append(textBox, metrics, el("div", { class: "ilab-kv__charts" }, el("div", {}, gridOverlay.node, key),
    bytesOverlay.node, timeChart), cmp.node);

  shell.plotly.then((P) => {
    if (!P) return;
    Plotly = P;
    const base = { ...BASE_LAYOUT, margin: { l: 60, r: 10, t: 56, b: 45 } };
    Plotly.newPlot(grid, [], { ...base, title: { text: "KV cache: layers × positions, K and V" },
      xaxis: { title: { text: "position (token)" } }, yaxis: { title: { text: "layer" } } }, PLOT_CONFIG);
    Plotly.newPlot(kvChart, [], {
      ...base, title: { text: "K/V computed so far" },
      xaxis: { title: { text: "step (0 = prefill)" } }, yaxis: { title: { text: "K and V" }, rangemode: "tozero" },
      legend: { orientation: "h", y: -0.25 },
    }, PLOT_CONFIG);
    // The overlays follow the plot area when Plotly redraws (a resize, a new run).
    for (const gd of [grid, kvChart]) gd.on("plotly_afterplot", placeOverlays);
    // A run that arrived before Plotly: draw the step the timeline shows.
    const tl = shell.timeline;
    if (tl && tl.log.current) drawStep(tl.log.current, tl.log.index, tl.log.steps);
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
