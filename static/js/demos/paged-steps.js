// A paged-KV run (docs/trace-schema/paged.md) as timeline steps, without the page (tested under node): one step
// per batched forward (`batch_step`) and a last one after the run. Each step is a snapshot, precomputed so the
// page only hands arrays to Plotly: the pool's cells (owner, state, what happened to it since the step before),
// each request's block table, the step's occupancy counters, and a caption saying what changed.
//
//   const steps = pagedSteps();  for (const ev of events) { const step = steps.fromEvent(ev); … }
//
// What happened "at" a step is every kv_block / preemption event since the previous step: the frees of the
// requests the previous forward finished (they follow its batch_step), arrivals, then this step's allocations.

export const REQUEST_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"];
export const FREE_COLOR = "#ffffff";
export const CACHED_COLOR = "#e5e7eb";
// Outline per operation: the cells an operation touched since the previous step stand out.
export const OP_LINE = { allocated: ["#111111", 4], shared: ["#d97706", 4], freed: ["#dc2626", 4], preempted: ["#dc2626", 4],
  "": ["#9ca3af", 1] };

const plural = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;
const list = (xs) => (xs.length === 1 ? `block ${xs[0]}` : `blocks ${xs.join(", ")}`);

/** A fresh converter for one run: `fromEvent(ev)` → a step (at each batch_step and at the run's end) or null. */
export function pagedSteps() {
  const s = { bs: 8, nb: 0, owners: new Map(), cached: new Set(), reqs: new Map(), order: [], ops: [], preempted: [],
    arrived: [], finished: [], preemptions: 0, series: [] };

  function request(id) { return s.reqs.get(id); }

  function onBlock(ev) {
    const r = ev.request_id ? request(ev.request_id) : null;
    if (ev.op === "allocated" || ev.op === "shared") {
      const owners = s.owners.get(ev.block) || [];
      owners.push({ id: ev.request_id, idx: ev.logical_index });
      s.owners.set(ev.block, owners);
      if (r) { r.blocks[ev.logical_index] = ev.block; r.state = "running"; r.changed.set(ev.logical_index, ev.op); }
    } else if (ev.op === "freed") {
      const owners = (s.owners.get(ev.block) || []).filter((o) => o.id !== ev.request_id);
      if (owners.length) s.owners.set(ev.block, owners);
      else s.owners.delete(ev.block);
      if (r) r.blocks.length = Math.min(r.blocks.length, ev.logical_index); // freed last to first
    } else if (ev.op === "cached") {
      s.cached.add(ev.block);
      return; // publishing to the prefix cache changes no ownership: not an operation the grid outlines
    } else if (ev.op === "evicted") {
      s.cached.delete(ev.block);
      return;
    }
    s.ops.push({ op: ev.op, block: ev.block, request_id: ev.request_id, logical_index: ev.logical_index });
  }

  /** The pool's cells now, with the operations since the previous step outlined. */
  function cells() {
    const touched = new Map();
    const preempted = new Set(s.preempted);
    for (const o of s.ops) {
      touched.set(o.block, o.op === "freed" && preempted.has(o.request_id) ? "preempted" : o.op);
    }
    const out = { state: [], op: [], color: [], text: [], hover: [], lineColor: [], lineWidth: [] };
    for (let b = 0; b < s.nb; b += 1) {
      const owners = s.owners.get(b);
      const op = touched.get(b) || "";
      let state;
      if (owners) {
        const first = owners[0];
        const r = request(first.id);
        const fill = Math.max(0, Math.min(s.bs, r.ctx - first.idx * s.bs));
        state = owners.length > 1 ? "shared" : "owned";
        out.color.push(r.color);
        out.text.push(`${first.id}:${first.idx}${owners.length > 1 ? ` ×${owners.length}` : ""}`);
        out.hover.push(`block ${b}: ${owners.map((o) => `${o.id} logical ${o.idx}`).join(", ")}; ${fill}/${s.bs} slots filled` +
          (owners.length > 1 ? `; shared by ${owners.length} requests` : "") + (op ? `; ${op} at this step` : ""));
      } else {
        state = s.cached.has(b) ? "cached" : "free";
        out.color.push(state === "cached" ? CACHED_COLOR : FREE_COLOR);
        out.text.push(state === "cached" ? "cached" : "");
        out.hover.push(`block ${b}: free${state === "cached" ? " (still holds a cached prefix)" : ""}${op ? `; ${op} at this step` : ""}`);
      }
      const [lc, lw] = OP_LINE[op] || OP_LINE[""];
      out.state.push(state);
      out.op.push(op);
      out.lineColor.push(lc);
      out.lineWidth.push(lw);
    }
    return out;
  }

  function tables() {
    return s.order.map((id) => {
      const r = request(id);
      return { id, color: r.color, state: r.state, ctx: r.ctx, prompt: r.prompt, max: r.max, text: r.text,
        blocks: r.blocks.map((b, i) => ({ logical: i, block: b, op: r.changed.get(i) || "" })) };
    });
  }

  /** One sentence: what the operations since the previous step did, grouped per request in their order. */
  function describe() {
    const parts = [];
    if (s.arrived.length) parts.push(`${s.arrived.join(", ")} arrived`);
    const groups = [];
    for (const o of s.ops) {
      const last = groups[groups.length - 1];
      if (last && last.op === o.op && last.id === o.request_id) last.blocks.push(o.block);
      else groups.push({ op: o.op, id: o.request_id, blocks: [o.block] });
    }
    for (const g of groups) {
      const blocks = g.op === "freed" ? [...g.blocks].reverse() : g.blocks;
      if (g.op === "allocated") parts.push(`${g.id} got ${list(blocks)}`);
      else if (g.op === "shared") parts.push(`${g.id} shares cached ${list(blocks)}`);
      else if (s.preempted.includes(g.id)) {
        parts.push(`out of blocks: ${g.id} was preempted and gave back ${list(blocks)} (its tokens will be recomputed)`);
      } else parts.push(`${g.id}${s.finished.includes(g.id) ? " finished and" : ""} freed ${list(blocks)}`);
    }
    return parts;
  }

  function snapshot(head, stats) {
    const parts = describe();
    const used = s.owners.size;
    const step = {
      caption: `${head}: ${parts.length ? parts.join("; ") : "no block changed hands"}. ${used} of ${s.nb} blocks in use.`,
      cells: cells(), tables: tables(), stats, used, free: s.nb - used, preemptions: s.preemptions,
      series: s.series.length, ops: s.ops,
    };
    s.ops = [];
    s.preempted = [];
    s.arrived = [];
    s.finished = [];
    for (const r of s.reqs.values()) r.changed = new Map();
    return step;
  }

  function fromEvent(ev) {
    switch (ev.type) {
      case "batch_run_started":
        s.bs = ev.block_size; s.nb = ev.num_blocks;
        return null;
      case "request_queued":
        s.reqs.set(ev.request_id, { color: REQUEST_COLORS[s.order.length % REQUEST_COLORS.length], blocks: [], ctx: 0,
          text: "", prompt: ev.prompt_len, max: ev.max_new_tokens, state: "waiting", changed: new Map() });
        s.order.push(ev.request_id);
        s.arrived.push(ev.request_id);
        return null;
      case "kv_block":
        onBlock(ev);
        return null;
      case "preemption": {
        const r = request(ev.request_id);
        r.state = "preempted"; r.ctx = 0;
        s.preemptions += 1;
        s.preempted.push(ev.request_id);
        return null;
      }
      case "request_finished": {
        const r = request(ev.request_id);
        r.state = ev.finish_reason === "aborted" ? "stopped" : "finished";
        r.text = ev.text;
        s.finished.push(ev.request_id);
        return null;
      }
      case "batch_step": {
        for (const e of ev.entries) {
          const r = request(e.request_id);
          r.ctx = e.context_len;
          r.text += e.text;
        }
        s.series.push({ step: ev.step, filled: ev.kv_slots_filled, allocated: ev.kv_slots_allocated,
          contiguous: ev.contiguous_slots_reserved });
        const kinds = ev.entries.map((e) => `${e.request_id} ${e.phase === "prefill" ? `prefills ${e.n_tokens} tokens` : "decodes"}`);
        const step = snapshot(`Step ${ev.step}`, ev);
        step.caption += ` The forward ran ${plural(ev.entries.length, "request")} (${kinds.join(", ")}).`;
        return step;
      }
      case "batch_run_finished": {
        const left = s.order.filter((id) => !["finished"].includes(request(id).state)).length;
        const step = snapshot("End of the run", null);
        step.caption += left ? ` ${plural(left, "request")} did not finish.` : " Every request finished.";
        return step;
      }
      default:
        return null;
    }
  }

  return { fromEvent, series: s.series, state: s };
}
