// The shell every live demo shares (kv-cache, prefill-decode, flash-attention, serving-load and the others):
// a settings form with Run/Stop, a status line, and one websocket run at a time. Each demo supplies its
// fields, reads their values into params, and handles the trace events.
import { forgetRun, getSocket, queueText, rememberRun, runKey, storedRun } from "../ws-client.js";
import { el, ensurePlotly, injectStyle } from "../calculators/ui.js";
import { compareMetrics } from "./compare-metrics.js";
import { fetchSharedRun, runExtras, sharedRunUrl } from "./run-history.js";
import { demoStage } from "./stage.js";
import { stepTimeline } from "./timeline.js";

/**
 * Build the shell inside `root`. fields: label elements from ui.js; getParams(): params or throws Error
 * (shown to the student); handlers.onStart(), onEvent(ev), onDone(frame).
 * Returns {body, setStatus, plotly (Promise), run, socket, timeline} — append the demo's outputs to `body`.
 * A run still going when the page reloads is resumed: onStart(params) again, then its events from the first.
 * Every demo also gets (run-history.js): "Replay a stored run instead of running live", the line saying what
 * measured the numbers (live/replay, device, dtype, engine version, date), a share link once a run is done,
 * "Compare runs" (series from compare-metrics.js, or `compare` here) and a shared run drawn read-only (its
 * share page, or ?run=<share id>) through the same onStart/onEvent/onDone.
 * steps (optional): {fromEvent(ev) → a step, a list of steps or null; draw(step, index, steps); picture} gives the
 * demo a step timeline (timeline.js): every event of a live, replayed or shared run goes through fromEvent, and
 * the student scrubs through the steps it made. `ilab:seek` dispatched on `root` moves it. picture: what draw
 * paints (an element, adjacent elements, or a function returning them once the demo has placed them in `body`):
 * the timeline is docked under it on one stage (stage.js), brought into view when the student's run starts.
 */
export function demoShell(root, config, { title, fields, getParams, onStart, onEvent, onDone, compare, steps }) {
  injectStyle();
  const socket = getSocket(config.wsPath || "/ws/demos/");
  const key = runKey(root, config.demo);
  const runBtn = el("button", { type: "submit", class: "ilab-run", text: "Run" });
  const stopBtn = el("button", { type: "button", class: "ilab-stop", "data-secondary": true, text: "Stop", disabled: true });
  // Replay choice, provenance line, share link and the runs comparison: shared by every demo (run-history.js).
  const extras = runExtras(root, config, { metrics: compare || compareMetrics(config.demo) });
  const form = el("form", { "aria-label": `${title}: settings` },
    el("fieldset", {}, el("legend", { text: "Settings" }), ...fields, extras.replayChoice,
      el("div", {}, runBtn, " ", stopBtn)));
  const status = el("p", { class: "ilab-calc__status", role: "status", "aria-live": "polite" });
  const body = el("div");
  const timeline = steps ? stepTimeline({ label: title, draw: steps.draw }) : null;
  const stage = timeline ? demoStage(timeline.element) : null; // until docked, the timeline sits above `body`
  root.append(el("div", { class: "ilab-calc" }, form, status, extras.provenance, extras.share,
    stage && stage.element, body, extras.panel));
  if (timeline) {
    root.addEventListener("ilab:seek", (e) => { if (e.target === root) timeline.seek(e.detail && e.detail.step); });
    queueMicrotask(() => stage.dock(steps.picture)); // the demo places its picture in `body` after this returns
  }
  let reveal = false; // the student's own run: its first step brings the stage into view, once
  /** Every event, live or stored, feeds the demo and then its timeline. */
  const handle = (ev) => {
    onEvent(ev);
    if (!timeline) return;
    const made = steps.fromEvent(ev);
    for (const step of Array.isArray(made) ? made : made ? [made] : []) timeline.push(step);
    if (reveal && timeline.log.steps.length) {
      reveal = false;
      afterFrames(stage.reveal); // once the step is drawn (timeline.js draws on the next frame)
    }
  };
  const begin = (params) => {
    if (timeline) { timeline.reset(); stage.dock(steps.picture); }
    onStart && onStart(params);
  };

  let current = null;
  const setStatus = (msg, isError = false) => {
    status.textContent = msg;
    status.classList.toggle("is-error", isError);
  };
  const setRunning = (running) => {
    // Focus on the button being disabled would fall to <body>, and a keyboard user would start over: it moves to
    // the other one (Run → Stop while running, Stop → Run after).
    const handOver = document.activeElement === (running ? runBtn : stopBtn);
    runBtn.disabled = running;
    stopBtn.disabled = !running;
    if (handOver) (running ? stopBtn : runBtn).focus({ preventScroll: true });
    root.dataset.state = running ? "running" : "idle";
  };
  const plotly = ensurePlotly(config.plotlyUrl).catch((err) => {
    setStatus(`Charts unavailable: ${err.message}`, true);
    return null;
  });

  async function run() {
    let params;
    try {
      params = getParams();
    } catch (err) {
      setStatus(err.message, true);
      return;
    }
    await plotly;
    follow(params, null);
  }

  /** Start a run with `params`, or (runId given) resume one started before a reload. */
  function follow(params, runId) {
    const token = {};
    current = token;
    reveal = Boolean(timeline) && !runId; // not a run resumed after a reload: the student may be reading elsewhere
    setRunning(true);
    setStatus(runId ? "Picking up the run you started before the page reloaded…"
      : "Queued… (the course server runs one demo at a time on its CPU)");
    const options = runId ? {} : extras.startOptions();
    extras.onStart();
    begin(params);
    const handlers = {
      onAccepted(frame) {
        root.dataset.runId = frame.run_id;
        rememberRun(key, frame.run_id, params);
        token.replayed = Boolean(frame.replayed_from);
        extras.onAccepted(frame);
        setStatus(token.replayed ? "Replaying a stored run with the same settings (no worker needed)…"
          : "Running…");
      },
      onHeader(frame) { if (current === token) extras.onHeader(frame); },
      onQueued(frame) { if (current === token) { token.waiting = true; setStatus(queueText(frame)); } },
      onResumed(frame) {
        if (current !== token) return;
        extras.onResumed(frame);
        setStatus(runId ? "Resumed after the reload; catching up…" : "Reconnected; catching up…");
      },
      onEvent(ev) {
        if (current !== token) return;
        if (token.waiting) { token.waiting = false; setStatus("Running…"); }
        extras.onEvent(ev);
        handle(ev);
      },
      onDone(frame) {
        forgetRun(key);
        if (current !== token) return;
        setRunning(false);
        const stopped = frame.status === "cancelled";
        setStatus(stopped ? "Stopped. What ran before the stop is shown above." : "Done.");
        root.dataset.state = stopped ? "cancelled" : "done";
        extras.onDone(frame, params);
        onDone && onDone(frame);
        if (stage) afterFrames(stage.settle);
      },
      onError(frame) {
        forgetRun(key);
        if (current !== token) return;
        setRunning(false);
        if (runId && frame.code === "not_found") { // e.g. signed out since: that run is not this visitor's
          setStatus("The run from before the reload is no longer available: run the demo again.");
          root.dataset.state = "idle";
          return;
        }
        setStatus(`Error: ${errorText(frame)}`, true);
        root.dataset.state = "error";
        if (frame.retry_after) countdown(frame);
      },
    };
    if (runId) {
      root.dataset.runId = runId;
      token.handle = socket.resume(runId, handlers);
    } else {
      token.handle = socket.start(config.demo, params, handlers, options);
    }
  }

  /** Tick a rate limit's "try again in N s" down to zero, then say the demo is ready again. */
  function countdown(frame) {
    let left = Math.ceil(frame.retry_after);
    const token = current;
    const timer = setInterval(() => {
      left -= 1;
      if (current !== token || root.dataset.state !== "error") { clearInterval(timer); return; }
      if (left <= 0) { clearInterval(timer); setStatus("Ready: you can run the demo again."); return; }
      setStatus(`Error: ${errorText({ ...frame, retry_after: left })}`, true);
    }, 1000);
  }

  form.addEventListener("submit", (e) => { e.preventDefault(); run(); });
  stopBtn.addEventListener("click", () => {
    if (current && current.handle) { current.handle.cancel(); setStatus("Stopping…"); }
  });
  socket.onState((state, detail) => { // the socket resumes the run once back (onResumed says so)
    root.dataset.socket = state; // "closed_idle": closed for idleness, reopened by the next run
    if (state === "reconnecting" && root.dataset.state === "running") {
      setStatus(`Connection lost; reconnecting (attempt ${detail.attempt})…`, true);
    } else if (state === "too_many_sockets" && root.dataset.state !== "running") {
      setStatus("Too many demo connections are open from this browser or network: close another tab; "
        + "retrying in a few seconds…", true);
    } else if (state === "closed_idle" && root.dataset.state !== "running") {
      setStatus("The demo connection was closed after a while without use; it reopens when you run the demo.");
    }
  });
  socket.connect();
  setRunning(false);
  const stored = storedRun(key);
  const shared = sharedRunUrl(root, config);
  // A lesson whose narration moves this demo names its reference run on the embed (courseapp/demo_cues.py).
  const reference = root.closest(".demo-embed")?.dataset.referenceRun;
  if (stored) plotly.then(() => follow(stored.params || {}, stored.runId));
  else if (shared) plotly.then(() => showShared(shared));
  else if (reference) plotly.then(() => showShared(reference, { reference: true }));

  /** Draw a finished run from its stored trace (a share link): no socket, no model. On its own share page
   * the form stays disabled (read-only); on a lesson (?run=) the student can still run the demo. */
  async function showShared(url, { reference = false } = {}) {
    const readOnly = Boolean(config.sharedRun);
    if (readOnly) form.querySelector("fieldset").disabled = true;
    setStatus("Loading the shared run…");
    let data;
    try {
      data = await fetchSharedRun(url);
      await new Promise((resolve) => setTimeout(resolve, 0)); // the demo's own Plotly set-up runs first
    } catch (err) {
      setStatus(`Could not open the shared run: ${err.message}.`, true);
      root.dataset.state = "error";
      return;
    }
    if (data.demo !== config.demo || current) { if (!current) setStatus(""); return; }
    extras.onStart();
    begin(data.params || {});
    for (const ev of data.events || []) {
      try { handle(ev); } catch (err) { console.error(err); }
    }
    const frame = { type: "done", status: "done", summary: data.summary || {}, run_id: null };
    onDone && onDone(frame);
    extras.showShared(data);
    setStatus(readOnly ? "A shared run, redrawn from its stored trace (read-only)."
      : reference ? "The lesson's reference run, redrawn from its stored trace: run the demo to make your own."
        : "A shared run, redrawn from its stored trace: run the demo to make your own.");
    root.dataset.state = "shared";
    if (data.share_id) root.dataset.sharedRun = data.share_id;
    if (reference) root.dataset.referenceRun = "shown";
  }
  return { body, setStatus, plotly, run, socket, timeline };
}

/** Run `fn` after the next two animation frames: after a redraw the timeline scheduled, and its layout. */
const afterFrames = (fn) => requestAnimationFrame(() => requestAnimationFrame(fn));

/** A labelled textarea for the prompt; Ctrl/Cmd+Enter submits its form. */
export function promptField(text, value) {
  const id = `ilab-prompt-${Math.random().toString(36).slice(2, 8)}`;
  const input = el("textarea", { id, rows: "2", required: true });
  input.value = value || "";
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); input.form && input.form.requestSubmit(); }
  });
  return { label: el("label", { for: id, class: "ilab-calc__wide" }, `${text} (Ctrl+Enter runs)`, input), input };
}

/** Read an integer input within [min, max] or throw an Error naming the field. */
export function intIn(input, name, min, max) {
  const v = Number(input.value);
  if (!Number.isInteger(v) || v < min || v > max) throw new Error(`${name} must be a whole number from ${min} to ${max}.`);
  return v;
}

export function numIn(input, name, min, max) {
  const v = Number(input.value);
  if (!Number.isFinite(v) || v < min || v > max) throw new Error(`${name} must be a number from ${min} to ${max}.`);
  return v;
}

/** An error frame as one sentence for the status line ("… Try again in 12 s."). */
export function errorText(frame) {
  const message = String(frame.message || "the run failed").replace(/[.\s]+$/, "");
  const retry = frame.retry_after ? ` Try again in ${Math.ceil(frame.retry_after)} s.` : "";
  return `${message}.${retry}`;
}
