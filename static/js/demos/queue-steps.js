// The scheduler's queues per engine step, as the step timeline of the batching and serving-load demos shows them:
// one step per forward pass, with who waited, who ran (and in which phase), who held an idle slot and who had
// finished, plus the Gantt column of that step. Pure folds over the trace events (tested under node); the demos
// only draw what they return.
//
// Lanes are the queues *as the forward pass ran*: `running` is the pass itself (a request whose last token it
// produced is still in it, `finishes: true`), `finished` holds the requests done in earlier passes, `waiting` the
// arrived requests not in the pass, `held` (static batching) finished requests whose slot sits idle. So
// `running.length` and `waiting.length` equal the scheduler's own counts (`batch_step.running` / `.waiting`), and
// the caption's counts are the lanes' (the running lane shows the held slots beside the pass, counted apart).

// Gantt cell codes (the demos colour them): a request not arrived yet, or done, is 0.
export const CELL = { none: 0, waiting: 1, prefill: 2, decode: 3, held: 4 };

const list = (ids) => ids.join(", ");
const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

/** The part of a caption that says what changed: joins, finishes, preemptions (or that nothing did). */
function changes({ joined, rejoined, finishing, preempted }, who) {
  const parts = [];
  if (joined.length) parts.push(`${who(joined)} ${joined.length === 1 ? "joins" : "join"} the running batch`);
  if (rejoined.length) parts.push(`${who(rejoined)} ${rejoined.length === 1 ? "rejoins" : "rejoin"} after a preemption (prefill again)`);
  if (preempted.length) parts.push(`${who(preempted)} ${preempted.length === 1 ? "is" : "are"} preempted back to waiting`);
  if (finishing.length) parts.push(`${who(finishing)} ${finishing.length === 1 ? "finishes" : "finish"}`);
  return parts.length ? parts.join("; ") : "the same batch decodes one more token each";
}

/** The lanes' sizes as the picture shows them: the pass (its finishing requests are still in it, marked ✓), the
 * waiting lane, and the requests that finished in an earlier pass (a finishing one is not among them yet). */
function counts(lanes) {
  const finishing = lanes.running.filter((r) => r.finishes).length;
  const pass = `${lanes.running.length} in this pass${finishing ? `, ${finishing} of them finishing` : ""}`;
  return `${pass}, ${lanes.waiting.length} waiting, ${lanes.finished.length} finished before`;
}

/** Batching demo: events of `run_batch` (one or two runs back to back) → one step per `batch_step`. */
export class BatchQueues {
  constructor() { this.reset(); }

  reset() {
    this.runs = []; // {mode, slots, order: [request ids], status: {id: "waiting"|"running"|"finished"}}
    this.run = null;
    this.preempted = [];
  }

  /** One event → a step (on `batch_step`) or null. */
  fromEvent(ev) {
    if (ev.type === "batch_run_started") {
      this.run = { index: this.runs.length, mode: ev.mode, slots: ev.max_num_seqs, order: [], status: {}, ran: {}, waited: {}, held: {} };
      this.runs.push(this.run);
      this.preempted = [];
      return null;
    }
    const run = this.run;
    if (!run) return null;
    if (ev.type === "request_queued") {
      run.order.push(ev.request_id);
      run.status[ev.request_id] = "waiting";
    } else if (ev.type === "preemption") {
      run.status[ev.request_id] = "waiting";
      this.preempted.push(ev.request_id);
    } else if (ev.type === "request_finished") {
      run.status[ev.request_id] = "finished"; // an aborted request too
    } else if (ev.type === "batch_step") {
      return this.step(run, ev);
    }
    return null;
  }

  step(run, ev) {
    const inPass = new Set(ev.entries.map((x) => x.request_id));
    const held = new Set(ev.idle);
    const joined = [];
    const rejoined = [];
    const running = ev.entries.map((x) => {
      if (run.status[x.request_id] !== "running") (run.ran[x.request_id] ? rejoined : joined).push(x.request_id);
      run.ran[x.request_id] = true;
      return { id: x.request_id, phase: x.phase, finishes: !!x.finished, joined: run.status[x.request_id] !== "running" };
    });
    const lanes = {
      waiting: run.order.filter((id) => run.status[id] === "waiting" && !inPass.has(id)),
      running,
      held: run.order.filter((id) => held.has(id)),
      finished: run.order.filter((id) => run.status[id] === "finished" && !inPass.has(id) && !held.has(id)),
    };
    const column = run.order.map((id) => (inPass.has(id) ? (running.find((r) => r.id === id).phase === "prefill" ? CELL.prefill : CELL.decode)
      : held.has(id) ? CELL.held : lanes.waiting.includes(id) ? CELL.waiting : CELL.none));
    for (const id of lanes.waiting) run.waited[id] = (run.waited[id] || 0) + 1;
    for (const id of lanes.held) run.held[id] = (run.held[id] || 0) + 1;
    const preempted = this.preempted.filter((id) => !inPass.has(id));
    this.preempted = [];
    for (const x of ev.entries) run.status[x.request_id] = x.finished ? "finished" : "running";
    const finishing = running.filter((r) => r.finishes).map((r) => r.id);
    const who = (ids) => `request${ids.length === 1 ? "" : "s"} ${list(ids)}`;
    const heldNote = lanes.held.length ? `; ${plural(lanes.held.length, "finished request holds its slot", "finished requests hold their slots")} idle` : "";
    const caption = `Step ${ev.step} (${run.mode}): ${changes({ joined, rejoined, finishing, preempted }, who)} (${counts(lanes)})` +
      `; one forward pass serves ${plural(running.length, "sequence", "sequences")}${heldNote}`;
    // Steps each request spent waiting, and holding an idle slot, up to this one (the Gantt's text alternative).
    const waited = run.order.map((id) => run.waited[id] || 0);
    const heldFor = run.order.map((id) => run.held[id] || 0);
    return { caption, run: run.index, mode: run.mode, slots: run.slots, step: ev.step, order: run.order.slice(), column, lanes,
      waited, heldFor };
  }
}

/** Serving-load demo: `load_step` events → one step per engine forward. Requests are numbered from 0; one that has
 * not arrived is in no queue. A stored run from before the queues were recorded (no `running_ids`) still gives its
 * steps, with the counts only. */
export class LoadQueues {
  constructor() { this.reset(); }

  reset() {
    this.n = 0;
    this.status = {}; // id → "waiting" | "running" | "finished"
    this.ran = {};
  }

  fromEvent(ev) {
    if (ev.type !== "load_step") return null;
    const stepNo = this.n; // 0-based, as the engine counts batching steps
    this.n += 1;
    if (!Array.isArray(ev.running_ids)) {
      return { caption: `Step ${stepNo}: ${ev.n_running} running, ${ev.n_waiting} waiting; ${ev.tokens_total} tokens so far`,
        step: stepNo, t: ev.t_s, column: [], lanes: { waiting: [], running: [], held: [], finished: [] } };
    }
    const done = new Set(ev.finished_ids);
    const inPass = new Set(ev.running_ids);
    const joined = ev.running_ids.filter((id) => !this.ran[id]);
    const running = ev.running_ids.map((id) => ({ id, phase: this.ran[id] ? "decode" : "prefill", finishes: done.has(id), joined: !this.ran[id] }));
    const lanes = { waiting: [...ev.waiting_ids], running, held: [], finished: ev.finished_ids.filter((id) => !inPass.has(id)) };
    const finishing = running.filter((r) => r.finishes).map((r) => r.id);
    const seen = Math.max(-1, ...ev.running_ids, ...ev.waiting_ids, ...ev.finished_ids) + 1;
    const column = [...Array(seen).keys()].map((id) => (inPass.has(id) ? (this.ran[id] ? CELL.decode : CELL.prefill)
      : ev.waiting_ids.includes(id) ? CELL.waiting : CELL.none));
    for (const id of ev.running_ids) this.ran[id] = true;
    const who = (ids) => `request${ids.length === 1 ? "" : "s"} ${ids.map((id) => `#${id}`).join(", ")}`;
    const caption = `Step ${stepNo} (${ev.t_s.toFixed(2)} s): ${changes({ joined, rejoined: [], finishing, preempted: [] }, who)} ` +
      `(${counts(lanes)}); one forward pass serves ${plural(running.length, "sequence", "sequences")}`;
    return { caption, step: stepNo, t: ev.t_s, column, lanes };
  }
}

/** The Gantt of run `run` as step `upTo` (an index into `steps`, every run's steps in order) shows it: {z: rows ×
 * columns, x: the step numbers, rows: the request ids}. A column per step number from 0 to the run's last (idle
 * steps stay empty), columns after `upTo` empty, so the chart keeps its size while the student scrubs. */
export function ganttUpTo(steps, run, upTo) {
  let last = 0;
  let rows = [];
  for (const s of steps) if (s.run === run) { last = s.step; rows = s.order || rows; }
  if (!rows.length) {
    const widest = steps.reduce((m, s) => (s.run === run ? Math.max(m, s.column.length) : m), 0);
    rows = [...Array(widest).keys()];
  }
  const z = rows.map(() => new Array(last + 1).fill(CELL.none));
  for (let i = 0; i <= upTo && i < steps.length; i += 1) {
    const s = steps[i];
    if (s.run !== run) continue;
    for (let r = 0; r < s.column.length && r < z.length; r += 1) z[r][s.step] = s.column[r];
  }
  return { z, x: [...Array(last + 1).keys()], rows };
}
