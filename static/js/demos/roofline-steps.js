// The prefill-vs-decode run as points on this server's roofline, one step per forward pass, without the page:
// tested under node (tests/js/roofline-steps.test.mjs). The roofs come from the run's `machine_roofs` event (the
// bandwidth and matmul rate the demo worker measured while idle); each `token` event is one forward with its FLOPs,
// bytes and time. The roof formulas are the roofline calculator's (calculators/formulas.js).
//
//   const fromEvent = rooflineSteps();  // one per run
//   fromEvent(ev) → {caption, index, phase, nInput, intensity, flopsPerS, bytesPerS, bound, roofs, points} | null
//
// `points` is the run's list of points so far (shared by its steps); a step is its `index` in it.
import { attainableFlops, formatDecimal, ridgePoint } from "../calculators/formulas.js";

const sig = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toPrecision(2));

/** What bounds a point of `intensity` FLOP/byte achieving `flopsPerS` under `roofs` ({bandwidth, peak}, per s):
 * the roof there (min(peak, intensity × bandwidth)), which roof it is, the ridge and how far below the roof it ran. */
export function boundOf(intensity, flopsPerS, roofs) {
  const ridge = ridgePoint(roofs.peak, roofs.bandwidth);
  const roof = attainableFlops(intensity, roofs.peak, roofs.bandwidth);
  return { by: intensity < ridge ? "memory" : "compute", ridge, roof, below: roof / flopsPerS };
}

function caption(p, roofs) {
  const what = p.phase === "prefill" ? `Prefill (${p.nInput} tokens in one pass)` : `Decode step ${p.step} (1 token)`;
  const at = `${what}: ${sig(p.intensity)} FLOP/byte, ${formatDecimal(p.flopsPerS, "FLOP/s")} achieved`;
  if (!roofs) return `${at}. This run carries no measured roofs of its server.`;
  const b = p.bound;
  const side = b.by === "memory" ? "left" : "right";
  const roof = b.by === "memory"
    ? `memory bandwidth bounds it: the roof there is ${formatDecimal(b.roof, "FLOP/s")} ` +
      `(${formatDecimal(roofs.bandwidth, "B/s")} × ${sig(p.intensity)} FLOP/byte); it moved ${formatDecimal(p.bytesPerS, "B/s")}`
    : `compute bounds it: the roof there is the measured ${formatDecimal(roofs.peak, "FLOP/s")}`;
  const start = `${at}, ${side} of the ridge (${sig(b.ridge)} FLOP/byte), so ${roof}`;
  // Above its roof: no forward beats the hardware, so the roof was measured low (a busy machine, or its spread).
  const verdict = b.below < 1
    ? `; yet it ran ${sig(1 / b.below)}× faster than that roof allows, so the roof is a measurement problem ` +
      "(measured low, e.g. while the server was busy), not a limit this pass beat."
    : `, ${sig(b.below)}× what it achieved.`;
  return start + verdict + shortPrefillNote(p, b);
}

/** A prefill left of the ridge contradicts "prefill is compute-bound" only for a short prompt: its intensity grows
 * with the tokens of the pass (the weights are read once for all of them), so say from about how many it crosses. */
function shortPrefillNote(p, b) {
  if (p.phase !== "prefill" || b.by !== "memory" || !(p.intensity > 0)) return "";
  const crossing = Math.ceil(p.nInput * b.ridge / p.intensity);
  return ` A prompt this short is the exception: prefill's FLOP per byte grows with its tokens (every weight read ` +
    `once serves them all), so it crosses the ridge from roughly ${crossing} tokens on.`;
}

/** A step maker for one run. */
export function rooflineSteps() {
  let roofs = null;
  let points = [];
  return function fromEvent(ev) {
    if (ev.type === "run_started") {
      points = [];
      return null;
    }
    if (ev.type === "machine_roofs") {
      roofs = { bandwidth: ev.bandwidth_bytes_per_s, peak: ev.peak_flops_per_s, label: ev.label, note: ev.note };
      return null;
    }
    if (ev.type !== "token" || !(ev.bytes_moved > 0) || !(ev.step_time_s > 0)) return null;
    const intensity = ev.flops / ev.bytes_moved;
    const flopsPerS = ev.flops / ev.step_time_s;
    const p = { index: points.length, step: ev.step, phase: ev.phase, nInput: ev.n_input_tokens, intensity, flopsPerS,
      bytesPerS: ev.bytes_moved / ev.step_time_s, roofs, points };
    p.bound = roofs ? boundOf(intensity, flopsPerS, roofs) : null;
    p.caption = caption(p, roofs);
    points.push(p);
    return p;
  };
}
