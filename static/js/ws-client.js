// One shared websocket client for live demos (protocol: docs/protocol.md).
//
//   import { getSocket } from "/static/js/ws-client.js";
//   const sock = getSocket("/ws/demos/");
//   const run = sock.start("kv-cache", {prompt: "Hi"}, {
//     onAccepted(frame) {}, onHeader(frame) {}, onEvent(event, seq, frame) {}, onDone(frame) {}, onError(frame) {},
//   }, {replay: false});
//   run.cancel();
//
// Reconnects with exponential backoff (plus jitter) and, once reconnected, resumes every run that
// had not finished from the last sequence number it saw, so each event is handled exactly once.
//
// An anonymous visitor has no session until their first run (page views create none): before the first
// `start`, the socket asks the server for one (VISITOR_URL) and, if it was new, reconnects so its handshake
// carries the cookie and the run is owned by that session (resumable after a reload, from another tab).
//
// A page reload keeps its runs too: a demo remembers its unfinished run in sessionStorage
// (rememberRun/forgetRun) and, once reloaded, picks it up with sock.resume(storedRun(key).runId, handlers),
// which replays the run's stored events from the start and then follows it live. Leaving the page
// does not cancel a run at once: the server cancels it when no socket has resumed it within its grace
// period (DEMO_ORPHAN_GRACE, docs/protocol.md).

const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 8000;
const PING_MS = 20000;
const OPEN_TIMEOUT_MS = 10000; // a socket that has not opened by then is dropped and retried
const VISITOR_URL = "/demos/visitor/"; // POST: makes the anonymous visitor's session ({created})
// Close codes the server ends a socket with (docs/protocol.md): unused for a while (reopened at the next send,
// not at once: an open tab that runs nothing holds no socket), and too many sockets for this visitor or address
// (retried slowly: another tab may close).
const CLOSE_IDLE = 4408;
const CLOSE_TOO_MANY_SOCKETS = 4429;

let refCounter = 0;
const sockets = new Map();

export function wsUrl(path) {
  if (/^wss?:\/\//.test(path)) return path;
  const proto = window.location.protocol === "https:" ? "wss:" : "ws:";
  return `${proto}//${window.location.host}${path}`;
}

const WARMUP_PHASES = {
  starting: "starting",
  kernels: "building kernels",
  loading: "loading the model",
  first_decode: "first decode",
};

/** The status line for a `queued` frame: "Waiting for a worker: 3rd in line, about 40 s…"; while no worker is
 * warm yet (`warming`), what it is doing instead: a queue estimate then could not come true. */
export function queueText(frame) {
  const w = frame.warming;
  if (w && w.phase === "given_up") {
    // Nothing is starting: `make run`'s supervisor stopped restarting a demo worker that kept dying.
    return "The demo worker is down: it crashed again and again, and the server has stopped restarting it, so " +
      "demo runs cannot start. Tell whoever runs this course: restarting the server (`make run`) brings it back.";
  }
  if (w) {
    const phase = WARMUP_PHASES[w.phase] || w.phase;
    const since = w.warming_s >= 1 ? `, ~${Math.round(w.warming_s)} s so far` : "";
    return `The demo worker is warming up: ${phase}${since}. Your run starts when it is ready…`;
  }
  const n = frame.position;
  const place = n === 1 ? "next in line" : `number ${n} in line`;
  const eta = frame.eta_s >= 1 ? `, about ${Math.round(frame.eta_s)} s` : "";
  return `Waiting for a worker: ${place}${eta}…`;
}

const RUN_STORE_PREFIX = "ilab-run:";

/** Remember an unfinished run under `key` (one key per demo on a page) so a reload can resume it. */
export function rememberRun(key, runId, params) {
  try { sessionStorage.setItem(RUN_STORE_PREFIX + key, JSON.stringify({ runId, params })); } catch { /* storage off */ }
}

export function forgetRun(key) {
  try { sessionStorage.removeItem(RUN_STORE_PREFIX + key); } catch { /* storage off */ }
}

/** The run remembered under `key`: {runId, params}, or null. */
export function storedRun(key) {
  try {
    const value = JSON.parse(sessionStorage.getItem(RUN_STORE_PREFIX + key) || "null");
    return value && typeof value.runId === "string" ? value : null;
  } catch {
    return null;
  }
}

/** A stable key for the demo in `root` on this page: path + demo name + its index among same-named demos. */
export function runKey(root, demo) {
  const same = [...document.querySelectorAll(`.ilab-demo[data-demo="${CSS.escape(demo)}"]`)];
  return `${location.pathname}#${demo}#${Math.max(0, same.indexOf(root))}`;
}

/** The page's shared socket for `path` (created on first use). */
export function getSocket(path = "/ws/demos/") {
  const url = wsUrl(path);
  if (!sockets.has(url)) sockets.set(url, new DemoSocket(url));
  return sockets.get(url);
}

export class DemoSocket {
  constructor(url) {
    this.url = url;
    this.ws = null;
    this.state = "idle";
    this.attempt = 0;
    this.outbox = [];
    this.pending = new Map(); // ref → run handle awaiting "accepted"
    this.runs = new Map(); // run_id → run handle (not finished)
    this.listeners = new Set();
    this.closedByUser = false;
    this.pingTimer = null;
    this.reconnectTimer = null;
    this.visitor = null; // the promise of this page's visitor session (asked for at the first start)
    this.refusal = null; // the last frame the server sent without a run (why it is about to close the socket)
  }

  /** Subscribe to connection state changes: fn(state, detail). Returns an unsubscribe function. */
  onState(fn) {
    this.listeners.add(fn);
    fn(this.state, {});
    return () => this.listeners.delete(fn);
  }

  _setState(state, detail = {}) {
    this.state = state;
    for (const fn of this.listeners) {
      try { fn(state, detail); } catch (e) { console.error(e); }
    }
  }

  connect() {
    if (this.ws && (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING)) return;
    this.closedByUser = false;
    this._setState(this.attempt ? "reconnecting" : "connecting", { attempt: this.attempt });
    const ws = new WebSocket(this.url);
    this.ws = ws;
    const openTimer = setTimeout(() => {
      if (ws.readyState === WebSocket.CONNECTING) ws.close();
    }, OPEN_TIMEOUT_MS);
    ws.onopen = () => {
      clearTimeout(openTimer);
      this.attempt = 0;
      this._setState("open");
      // Resume every unfinished run from the last event we handled.
      for (const run of this.runs.values()) {
        if (run.runId && !run.finished) {
          this._sendNow({ action: "resume", run_id: run.runId, after_seq: run.lastSeq });
        }
      }
      const queued = this.outbox;
      this.outbox = [];
      for (const msg of queued) this._sendNow(msg);
      clearInterval(this.pingTimer);
      this.pingTimer = setInterval(() => this._sendNow({ action: "ping" }), PING_MS);
    };
    ws.onmessage = (e) => this._onMessage(e);
    ws.onclose = (e) => {
      clearTimeout(openTimer);
      if (this.ws !== ws) return; // replaced (_reopen): the current socket's timers are not this one's
      clearInterval(this.pingTimer);
      this.ws = null;
      const refusal = e.code === CLOSE_TOO_MANY_SOCKETS && this.refusal ? this.refusal : null;
      this.refusal = null;
      // Starts that were never accepted cannot be resumed: report them (with the server's reason, if it gave one).
      for (const [ref, run] of this.pending) {
        this.pending.delete(ref);
        run._error(refusal || { type: "error", code: "disconnected", message: "connection lost before the run was accepted" });
      }
      if (this.closedByUser) { this._setState("closed"); return; }
      if (e.code === CLOSE_IDLE && !this.runs.size && !this.outbox.length) {
        this._setState("closed_idle"); // send() and resume() reconnect
        return;
      }
      const tooMany = e.code === CLOSE_TOO_MANY_SOCKETS;
      const backoff = tooMany ? BACKOFF_MAX_MS : Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** this.attempt);
      const delay = backoff * (0.75 + Math.random() * 0.5);
      this.attempt += 1;
      if (tooMany) this._setState("too_many_sockets", { attempt: this.attempt, delayMs: Math.round(delay), frame: refusal });
      else this._setState("reconnecting", { attempt: this.attempt, delayMs: Math.round(delay) });
      clearTimeout(this.reconnectTimer);
      this.reconnectTimer = setTimeout(() => this.connect(), delay);
    };
    ws.onerror = () => { /* onclose follows and schedules the reconnect */ };
  }

  close() {
    this.closedByUser = true;
    clearTimeout(this.reconnectTimer);
    if (this.ws) this.ws.close();
  }

  /** For tests and debugging: drop the connection as a network failure would (then reconnect). */
  dropConnection() {
    if (this.ws) this.ws.close(4000, "simulated drop");
  }

  send(msg) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this._sendNow(msg);
    else { this.outbox.push(msg); this.connect(); }
  }

  _sendNow(msg) {
    try { this.ws.send(JSON.stringify(msg)); } catch (e) { this.outbox.push(msg); }
  }

  /** Start a demo run. Returns a handle with .cancel(), .runId (once accepted), .lastSeq.
   * options.replay: replay a stored identical run instead (no worker); options.live: never a replay. */
  start(demo, params, handlers = {}, options = {}) {
    const ref = `r${++refCounter}`;
    const run = new RunHandle(this, ref, handlers);
    const msg = { action: "start", demo, params, ref };
    if (options.replay) msg.replay = true;
    else if (options.live) msg.live = true;
    this._ensureVisitor().then(() => {
      this.pending.set(ref, run);
      this.send(msg);
    });
    return run;
  }

  /** Make sure this visitor has a session before their first run; reconnect if it is new (see the top). */
  _ensureVisitor() {
    if (!this.visitor) {
      this.visitor = fetch(VISITOR_URL, { method: "POST", credentials: "same-origin" })
        .then((response) => (response.ok ? response.json() : { created: false }))
        .then(({ created }) => { if (created) this._reopen(); })
        .catch(() => { this.visitor = null; }); // offline: the run goes out on this socket; ask again next time
    }
    return this.visitor;
  }

  /** Replace an open (or opening) socket by a new one at once. Not while a start awaits its `accepted` (only
   * after an earlier failed ask): that run would be lost; the next reconnect carries the session instead. */
  _reopen() {
    const old = this.ws;
    if (!old || this.pending.size) return;
    this.ws = null; // its onclose sees it is no longer the current socket and does nothing
    clearInterval(this.pingTimer);
    old.close();
    this.connect();
  }

  /** Follow a run started earlier (e.g. before a page reload) from its first event. Same handle as start(). */
  resume(runId, handlers = {}) {
    const run = new RunHandle(this, null, handlers);
    run.runId = runId;
    this.runs.set(runId, run);
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this._sendNow({ action: "resume", run_id: runId, after_seq: -1 });
    else this.connect(); // onopen resumes every unfinished run in this.runs
    return run;
  }

  _onMessage(e) {
    let frame;
    try { frame = JSON.parse(e.data); } catch { console.error("bad frame", e.data); return; }
    if (frame.type === "pong") return;
    if (frame.ref && this.pending.has(frame.ref)) {
      const run = this.pending.get(frame.ref);
      this.pending.delete(frame.ref);
      if (frame.type === "accepted") {
        run.runId = frame.run_id;
        this.runs.set(frame.run_id, run);
        run._call("onAccepted", frame);
      } else if (frame.type === "error") {
        run._error(frame);
      }
      return;
    }
    const run = frame.run_id ? this.runs.get(frame.run_id) : null;
    if (!run) {
      if (frame.type === "error") {
        if (!frame.run_id) this.refusal = frame; // `too_many_sockets`, `idle_timeout`: the close follows
        console.warn("demo socket error", frame);
      }
      return;
    }
    switch (frame.type) {
      case "event":
        if (frame.seq <= run.lastSeq) return; // already handled (resume overlap)
        run.lastSeq = frame.seq;
        run._call("onEvent", frame.event, frame.seq, frame);
        break;
      case "queued":
        run._call("onQueued", frame);
        break;
      case "header": // live or replay, and the device, dtype, engine version and time behind the numbers
        run.header = frame;
        run._call("onHeader", frame);
        break;
      case "resumed":
        run._call("onResumed", frame);
        break;
      case "done":
        this.runs.delete(run.runId);
        run.finished = true;
        run._call("onDone", frame);
        break;
      case "error":
        this.runs.delete(run.runId);
        run._error(frame);
        break;
      default:
        break;
    }
  }
}

class RunHandle {
  constructor(socket, ref, handlers) {
    this.socket = socket;
    this.ref = ref;
    this.handlers = handlers;
    this.runId = null;
    this.lastSeq = -1;
    this.finished = false;
  }

  cancel() {
    if (this.finished) return;
    if (this.runId) this.socket.send({ action: "cancel", run_id: this.runId });
    else this._cancelWhenAccepted = true;
  }

  _call(name, ...args) {
    const fn = this.handlers[name];
    if (name === "onAccepted" && this._cancelWhenAccepted) this.cancel();
    if (fn) {
      try { fn(...args); } catch (e) { console.error(e); }
    }
  }

  _error(frame) {
    this.finished = true;
    this._call("onError", frame);
  }
}
