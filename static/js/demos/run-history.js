// What every live demo shows around its own charts, in one place (course-demo-kit.js and kv-cache.js use it):
//
// - the choice "Replay a stored run instead of running live" (runs are live by default; the server replays a
//   stored identical run only when asked, or when every worker slot is busy: docs/protocol.md);
// - the provenance line: live or replay, and the device, dtype, engine version and time behind the numbers
//   (the run's `header` frame; a replay names the original run's);
// - a share link once a run has finished (/demos/runs/<share id>/ redraws it read-only);
// - "Compare runs": the student's last runs of this demo (sessionStorage, KEEP per demo, plus their runs stored
//   on the server, added on demand) overlaid on the same axes, each legend entry naming what changed between
//   the runs (the parameters that differ: cache on/off, format, draft, k, block size, tile…), and a
//   "Clear comparison" button;
// - reading a shared run's stored trace (a share link, or a lesson URL with ?run=<share id>).
//
// A demo declares what to compare: metrics = [{key, label, x, y, type?, extract(events) -> {x: [], y: [], lo?, hi?}}]
// (type "bar" for categories; lo and hi: where each bar's error bar ends, drawn when given); extract sees the run's
// trace events in order and returns one series.

import { BASE_LAYOUT, PLOT_CONFIG, el, ensurePlotly } from "../calculators/ui.js";

const STORE_PREFIX = "ilab-compare:";

/** Plotly's error bars for a series with `lo`/`hi` (each bar's spread around its value); none without them. */
export function errorBars(s) {
  if (!s.lo || !s.hi || s.lo.length !== s.y.length) return {};
  return { error_y: { type: "data", symmetric: false, array: s.y.map((y, i) => s.hi[i] - y),
    arrayminus: s.y.map((y, i) => y - s.lo[i]), color: "#111827", thickness: 1.5, width: 6 } };
}
export const KEEP = 5;
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"];
const STYLE_ID = "ilab-run-history-style";
const STYLE_CSS = `
.ilab-provenance { font-size: .85rem; color: #444; margin: .2rem 0 .6rem; }
.ilab-provenance:empty { display: none; }
.ilab-provenance.is-replay { background: #fff3cd; border: 1px solid #e0c36c; border-radius: 4px; padding: .2rem .45rem; }
.ilab-share { font-size: .85rem; margin: .2rem 0 .6rem; overflow-wrap: anywhere; }
.ilab-share button, .ilab-compare button { font: inherit; font-size: .85rem; padding: .2rem .6rem; border-radius: 6px;
  border: 1px solid #14213d; background: #fff; color: #14213d; cursor: pointer; }
.ilab-compare { border-top: 1px solid #e5e7eb; margin-top: 1rem; padding-top: .6rem; }
.ilab-compare h4 { margin: 0 0 .4rem; font-size: 1rem; }
.ilab-compare__controls { display: flex; flex-wrap: wrap; gap: .6rem; align-items: end; }
.ilab-compare__field { display: flex; flex-direction: column; gap: .2rem; min-width: 0; max-width: 100%; }
.ilab-compare__field label { font-weight: 600; font-size: .85rem; }
/* A long run label wraps the picker to the card's width instead of widening it past the screen. */
.ilab-compare__controls select { font: inherit; padding: .25rem; width: 100%; max-width: 100%; text-overflow: ellipsis; }
.ilab-compare__chart { min-height: 300px; min-width: 0; max-width: 100%; }
.ilab-compare__note { font-size: .85rem; color: #555; }
label.ilab-replay-choice { flex-direction: row !important; align-items: center; gap: .45rem; font-weight: 400 !important; }
`;

function injectStyle() {
  if (document.getElementById(STYLE_ID)) return;
  const style = document.createElement("style");
  style.id = STYLE_ID;
  style.textContent = STYLE_CSS;
  document.head.appendChild(style);
}

let uid = 0;
const nextId = (p) => `${p}-${++uid}`;

/** "2026-11-25 10:03 UTC" from an ISO date (the same text for every visitor). */
export function fmtWhen(iso) {
  const d = iso ? new Date(iso) : null;
  if (!d || Number.isNaN(d.getTime())) return "an unknown date";
  return `${d.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

/** One sentence saying what stands behind a run's numbers (a `header` frame, or a shared run's header). */
export function provenanceText(h, { shared = false } = {}) {
  if (!h) return "";
  const where = [h.device || "an unknown device", h.dtype].filter(Boolean).join(" · ");
  const engine = h.engine_version ? `engine version ${h.engine_version}` : "an unknown engine version";
  const model = h.model ? `, ${h.model}` : "";
  const when = fmtWhen(h.measured_at);
  if (shared) {
    return `Shared run (read-only, nothing runs): measured ${when} on ${where}, ${engine}${model}` +
      `${h.mode === "replay" ? " (itself a replay of a stored run)" : ""}.`;
  }
  if (h.mode === "replay") {
    const why = h.replay_reason === "busy"
      ? "every worker was busy, so a stored run with the same settings is shown"
      : "you asked for a stored run";
    return `Replay of a run recorded ${when} on ${where}, ${engine}${model}: ${why}.`;
  }
  return `Live run on ${where}, ${engine}${model}, started ${when}.`;
}

function paramLabel(spec, key) {
  const p = spec && spec.params && spec.params[key];
  return (p && p.label) || key.replace(/_/g, " ");
}

function fmtValue(value) {
  if (value === true) return "on";
  if (value === false) return "off";
  if (value === null || value === undefined) return "none";
  if (typeof value === "string") {
    const one = value.replace(/\s+/g, " ").trim();
    return `“${one.length > 28 ? `${one.slice(0, 27)}…` : one}”`;
  }
  if (typeof value === "object") return JSON.stringify(value).slice(0, 30);
  return String(value);
}

/** The legend names of `runs`: for each, the parameters whose values differ between the runs ("Use the KV
 * cache: off", "Format: int8, k: 4"); live/replay and the device when those differ; else its time. */
export function legendNames(runs, spec) {
  const keys = [...new Set(runs.flatMap((r) => Object.keys(r.params || {})))]
    .filter((k) => new Set(runs.map((r) => JSON.stringify((r.params || {})[k] ?? null))).size > 1);
  const differs = (get) => new Set(runs.map(get)).size > 1;
  const modes = differs((r) => r.mode || "live");
  const devices = differs((r) => r.device || "");
  const names = runs.map((r) => {
    const parts = keys.map((k) => `${paramLabel(spec, k)}: ${fmtValue((r.params || {})[k])}`);
    if (modes) parts.push(r.mode === "replay" ? "replay" : "live");
    if (devices && r.device) parts.push(r.device);
    if (r.source === "shared") parts.push("shared");
    return parts.join(", ");
  });
  return names.map((name, i) => {
    const clash = !name || names.filter((n) => n === name).length > 1;
    const when = fmtWhen(runs[i].measuredAt || runs[i].when).replace(" UTC", "").slice(11);
    if (!name) return runs.length > 1 ? `same settings, ${when}` : "this run";
    return clash ? `${name} (${when})` : name;
  });
}

/** For each of `paramsList`, the settings that tell it apart: the parameters whose values differ between the
 * runs, else those that differ from the spec's defaults ("Scheduling: sequential, k: 6"), else "default
 * settings". Named as the spec labels them; every changed one, whichever its place in the spec. */
export function changedSettings(paramsList, spec) {
  const defaults = Object.fromEntries(Object.entries((spec && spec.params) || {}).map(([k, p]) => [k, p && p.default]));
  const same = (a, b) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
  const keys = [...new Set(paramsList.flatMap((p) => Object.keys(p)))];
  const differing = keys.filter((k) => paramsList.some((p) => !same(p[k], paramsList[0][k])));
  return paramsList.map((p) => {
    const shown = differing.length ? differing : keys.filter((k) => k in defaults && !same(p[k], defaults[k]));
    const parts = shown.map((k) => `${paramLabel(spec, k)}: ${fmtValue(p[k])}`);
    return parts.length ? parts.join(", ") : "default settings";
  });
}

function readStore(demo) {
  try {
    const value = JSON.parse(sessionStorage.getItem(STORE_PREFIX + demo) || "[]");
    return Array.isArray(value) ? value.filter((r) => r && typeof r === "object" && r.series) : [];
  } catch {
    return [];
  }
}

function writeStore(demo, runs) {
  try { sessionStorage.setItem(STORE_PREFIX + demo, JSON.stringify(runs.slice(-KEEP))); } catch { /* full or off */ }
}

function fromTemplate(template, id) {
  return template ? template.replace("__run__", encodeURIComponent(id)) : null;
}

/** Fetch a shared run's stored trace ({demo, params, header, events, summary, share_url}); throws on failure. */
export async function fetchSharedRun(url) {
  const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (!response.ok) throw new Error(response.status === 404 ? "this run does not exist or is not finished"
    : `the server answered ${response.status}`);
  return response.json();
}

/** The share id a lesson URL names (?run=…) for this demo's first embed on the page, else null. */
export function sharedRunFromUrl(root, demo) {
  const id = new URLSearchParams(location.search).get("run");
  if (!id || !/^[A-Za-z0-9_-]{8,32}$/.test(id)) return null;
  const first = document.querySelector(`.ilab-demo[data-demo="${CSS.escape(demo)}"]`);
  return first === root ? id : null;
}

/**
 * The shared pieces for one demo on the page. Returns elements to place (replayChoice, provenance, share,
 * panel) and hooks for the demo's run lifecycle: startOptions(), onStart(), onAccepted(frame), onHeader(frame),
 * onEvent(ev), onDone(frame, params), showShared(data), addRun(record).
 */
export function runExtras(root, config, { metrics = [], checkClass = "ilab-calc__check" } = {}) {
  injectStyle();
  const demo = config.demo;
  const spec = config.spec || { params: {} };

  const replayId = nextId("ilab-replay");
  const replayBox = el("input", { id: replayId, type: "checkbox", "data-testid": "replay-choice" });
  const replayChoice = el("label", { for: replayId, class: `${checkClass} ilab-replay-choice` }, replayBox,
    "Replay a stored run instead of running live");
  const provenance = el("p", { class: "ilab-provenance", "data-testid": "run-provenance", "aria-live": "polite" });
  const share = el("p", { class: "ilab-share", "data-testid": "share-run", hidden: true });

  // --- the comparison ------------------------------------------------------------------------------
  const metricSel = el("select", { id: nextId("ilab-cmp-metric") });
  for (const m of metrics) metricSel.append(el("option", { value: m.key, text: m.label }));
  const storedSel = el("select", { id: nextId("ilab-cmp-stored") },
    el("option", { value: "", text: "—" }));
  const clearBtn = el("button", { type: "button", class: "ilab-compare__clear", text: "Clear comparison" });
  const chart = el("div", { class: "ilab-compare__chart", role: "img", "data-testid": "compare-chart",
    "aria-label": "Your recent runs of this demo overlaid on the same axes", hidden: true });
  const note = el("p", { class: "ilab-compare__note", "aria-live": "polite" });
  // Each <select> beside its <label>, not inside it: a label's name would take in the options' texts
  // (which repeat the demo's own field names).
  const field = (select, text) => el("div", { class: "ilab-compare__field" }, el("label", { for: select.id, text }), select);
  const controls = el("div", { class: "ilab-compare__controls" },
    metrics.length > 1 ? field(metricSel, "Compare on") : "", field(storedSel, "Add one of your stored runs"), clearBtn);
  const panel = el("section", { class: "ilab-compare", "aria-label": "Compare runs" },
    el("h4", { text: "Compare runs" }), controls, note, chart);
  if (!metrics.length) panel.hidden = true;

  let runs = readStore(demo);
  let Plotly = null;
  let current = { events: [], header: null, shareId: null };
  let stored = [];

  function metric() {
    return metrics.find((m) => m.key === metricSel.value) || metrics[0];
  }

  function draw() {
    if (!metrics.length) return;
    if (!runs.length) {
      chart.hidden = true;
      note.textContent = `Your finished runs appear here (the last ${KEEP}), on the same axes, to compare settings.`;
      if (Plotly && chart.data) Plotly.purge(chart);
      return;
    }
    chart.hidden = false;
    const m = metric();
    const names = legendNames(runs, spec);
    note.textContent = runs.length === 1 ? "Run again with other settings to overlay the runs."
      : `${runs.length} runs; the legend names what changed between them.`;
    if (!Plotly) return;
    const traces = runs.map((r, i) => {
      const s = (r.series || {})[m.key] || { x: [], y: [] };
      const color = COLORS[i % COLORS.length];
      return m.type === "bar"
        ? { type: "bar", name: names[i], x: [...s.x], y: [...s.y], marker: { color }, ...errorBars(s) }
        : { type: "scatter", mode: "lines+markers", name: names[i], x: [...s.x], y: [...s.y],
          line: { color, dash: i === runs.length - 1 ? "solid" : "dot" }, marker: { size: 5 } };
    });
    const layout = { ...BASE_LAYOUT, title: { text: m.label }, showlegend: true, barmode: "group",
      legend: { orientation: "h", y: -0.3 }, xaxis: { title: { text: m.x || "" } },
      yaxis: { title: { text: m.y || "" }, rangemode: "tozero" } };
    Plotly.react(chart, traces, layout, PLOT_CONFIG);
  }

  function seriesOf(events) {
    const out = {};
    for (const m of metrics) {
      try {
        const s = m.extract(events) || { x: [], y: [] };
        out[m.key] = { x: Array.from(s.x || []), y: Array.from(s.y || []) };
        if (s.lo && s.hi) Object.assign(out[m.key], { lo: Array.from(s.lo), hi: Array.from(s.hi) });
      } catch (err) {
        console.warn(`compare: ${m.key}`, err);
        out[m.key] = { x: [], y: [] };
      }
    }
    return out;
  }

  /** Add a finished run to the comparison (the newest KEEP stay). */
  function addRun(record) {
    if (!metrics.length) return;
    runs = runs.filter((r) => !record.id || r.id !== record.id);
    runs.push(record);
    runs = runs.slice(-KEEP);
    writeStore(demo, runs);
    draw();
  }

  function record(events, params, header, id, source = "mine") {
    const h = header || {};
    return { id, source, params: params || {}, series: seriesOf(events), when: new Date().toISOString(),
      mode: h.mode || "live", device: h.device || null, dtype: h.dtype || null,
      engineVersion: h.engine_version || null, measuredAt: h.measured_at || null };
  }

  clearBtn.addEventListener("click", () => { runs = []; writeStore(demo, runs); draw(); });
  metricSel.addEventListener("change", draw);

  async function loadStoredList() {
    if (!config.myRunsUrl || !metrics.length) return;
    try {
      const response = await fetch(`${config.myRunsUrl}?demo=${encodeURIComponent(demo)}`,
        { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) return;
      stored = (await response.json()).runs || [];
    } catch {
      return;
    }
    storedSel.replaceChildren(el("option", { value: "", text: stored.length ? "Pick a run…" : "none yet" }));
    stored.forEach((r, i) => {
      const h = r.header || {};
      const what = changedSettings(stored.map((s) => s.params || {}), spec)[i];
      storedSel.append(el("option", { value: String(i),
        text: `${fmtWhen(r.finished_at || h.measured_at)}${h.mode === "replay" ? " (replay)" : ""} — ${what}` }));
    });
  }

  storedSel.addEventListener("change", async () => {
    const r = stored[Number(storedSel.value)];
    storedSel.value = "";
    if (!r) return;
    try {
      const data = await fetchSharedRun(r.data_url);
      addRun(record(data.events || [], data.params, data.header, data.share_id, "stored"));
    } catch (err) {
      note.textContent = `Could not load that run: ${err.message}.`;
    }
  });

  ensurePlotly(config.plotlyUrl).then((P) => { Plotly = P; draw(); }).catch(() => { /* the demo says so */ });
  draw();
  loadStoredList();

  function shareLink(shareId) {
    const path = fromTemplate(config.shareUrlTemplate, shareId);
    if (!path) return;
    const url = new URL(path, location.href).href;
    const link = el("a", { href: url, "data-testid": "share-link", text: url });
    const copy = el("button", { type: "button", text: "Copy link" });
    copy.addEventListener("click", async () => {
      try { await navigator.clipboard.writeText(url); copy.textContent = "Copied"; } catch { copy.textContent = "Select the link to copy it"; }
    });
    share.replaceChildren("Share this run (read-only, no model runs): ", link, " ", copy);
    share.hidden = false;
  }

  return {
    replayChoice, replayBox, provenance, share, panel,
    /** Options for socket.start(): replay when the student ticked the box. */
    startOptions() { return replayBox.checked ? { replay: true } : {}; },
    onStart() {
      current = { events: [], header: null, shareId: null };
      provenance.textContent = "";
      provenance.classList.remove("is-replay");
      share.hidden = true;
      share.replaceChildren();
    },
    onAccepted(frame) {
      current.shareId = frame.share_id || null;
      current.unavailable = Boolean(frame.replay_unavailable);
      if (frame.replay_unavailable) {
        provenance.textContent = "No stored run has these settings yet: this run is live.";
      }
    },
    onResumed(frame) { if (frame.share_id) current.shareId = frame.share_id; },
    onHeader(frame) {
      current.header = frame;
      provenance.textContent = provenanceText(frame);
      provenance.classList.toggle("is-replay", frame.mode === "replay");
      root.dataset.runMode = frame.mode;
    },
    onEvent(ev) { current.events.push(ev); },
    /** A finished run: into the comparison, and its share link (done runs only). */
    onDone(frame, params) {
      if (frame.status !== "done") return;
      addRun(record(current.events, params, current.header, current.shareId || frame.run_id));
      if (current.shareId) shareLink(current.shareId);
      loadStoredList();
    },
    /** A shared run was drawn from its stored trace: say so, and offer it to the comparison. */
    showShared(data) {
      current = { events: data.events || [], header: data.header, shareId: data.share_id };
      provenance.textContent = provenanceText(data.header, { shared: true });
      provenance.classList.add("is-replay");
      root.dataset.runMode = "shared";
      const add = el("button", { type: "button", text: "Add to the comparison" });
      add.addEventListener("click", () => {
        addRun(record(data.events || [], data.params, data.header, data.share_id, "shared"));
        add.disabled = true;
      });
      share.replaceChildren(add);
      share.hidden = false;
    },
    addRun,
    runs: () => runs.slice(),
  };
}

/** The URL of the shared run this demo should draw (the share page's, or ?run= on a lesson), else null. */
export function sharedRunUrl(root, config) {
  if (config.sharedRun) return config.sharedRun;
  const id = sharedRunFromUrl(root, config.demo);
  return id ? fromTemplate(config.runDataUrlTemplate, id) : null;
}
