// A run as a sequence of steps the student moves through: a scrubber, first / back / play-pause / forward / last
// buttons, "Step i of n" and a one-line caption that says what changed (read by screen readers). One timeline
// serves a live run (it follows the newest step until the student takes over), a replay and a shared run (all
// steps pushed at once; it shows the last). The demo draws; the timeline only says which step to draw, at most
// once per animation frame, so dragging the scrubber over a long run stays smooth.
//
//   const tl = stepTimeline({ label: "KV cache", draw: (step, index, steps) => … });
//   parent.append(tl.element); tl.push({ caption: "Token 3: the cache grows to 8 positions", …demo data });
//
// A step is a plain object with a `caption` (one sentence) and whatever the demo needs to draw it; keep it
// cheap to draw (precompute in fromEvent, not in draw). Outside code (the narration, tests) moves the timeline
// by dispatching `new CustomEvent("ilab:seek", { detail: { step } })` on its element or on the demo's root;
// every move dispatches `ilab:step` ({ index, steps }) from the element, which bubbles.
import { el } from "../calculators/ui.js";
import { icon } from "./timeline-icons.js";

const STYLE_ID = "ilab-timeline-style";
// The scrubber spans the whole row above the buttons at every width (on a phone too: it was 39 px beside them in a
// lesson); the buttons, the step count and the speed share the row under it and wrap when narrow.
const CSS = `
.ilab-timeline { display: grid; gap: .3rem; margin: .6rem 0 0; padding: .5rem .6rem; background: #f6f8fa; border-radius: 6px; }
.ilab-timeline[hidden] { display: none; }
.ilab-timeline input[type=range] { width: 100%; min-width: 0; margin: 0; }
.ilab-timeline__bar { display: flex; flex-wrap: wrap; align-items: center; justify-content: space-between; gap: .3rem .6rem; }
.ilab-timeline__buttons { display: flex; gap: .25rem; }
.ilab-timeline__buttons button { display: inline-flex; align-items: center; justify-content: center; padding: .3rem .55rem; min-width: 2.4rem; }
.ilab-timeline__buttons .ilab-icon { width: 1.05em; height: 1.05em; }
.ilab-timeline__count { font-variant-numeric: tabular-nums; font-size: .85rem; color: #444; white-space: nowrap; }
.ilab-timeline__caption { margin: 0; min-height: 1.3em; font-size: .92rem; }
.ilab-timeline__speed { font-size: .85rem; }
@media (max-width: 600px) { .ilab-timeline__caption { font-size: .85rem; } } /* docked on a phone: less picture hidden */
`;

/** The timeline's state without the page (tested under node): the steps, the shown index, and whether it
 * follows new steps as they arrive (true until the student moves away from the newest). */
export class StepLog {
  constructor() { this.reset(); }

  reset() {
    this.steps = [];
    this.index = -1;
    this.following = true;
  }

  get last() { return this.steps.length - 1; }

  /** Add a step; returns true when the shown step changed (it follows to the new one). */
  push(step) {
    this.steps.push(step);
    if (this.following) {
      this.index = this.last;
      return true;
    }
    return false;
  }

  /** Show step `i` (clamped into the run); following again once it is the newest. Returns true on a change. */
  seek(i) {
    if (!this.steps.length) return false;
    const next = Math.max(0, Math.min(this.last, Math.round(Number(i) || 0)));
    this.following = next === this.last;
    if (next === this.index) return false;
    this.index = next;
    return true;
  }

  get current() { return this.index >= 0 ? this.steps[this.index] : null; }
}

function injectStyle() {
  if (document.getElementById(STYLE_ID)) return;
  const style = document.createElement("style");
  style.id = STYLE_ID;
  style.textContent = CSS;
  document.head.appendChild(style);
}

const PLAY_RATES = { "1 step/s": 1000, "4 steps/s": 250, "15 steps/s": 66 };

/** Build a timeline; `draw(step, index, steps)` paints the demo's picture for one step. */
export function stepTimeline({ label, draw }) {
  injectStyle();
  const log = new StepLog();
  const button = (shape, name) => el("button", { type: "button", "data-secondary": true, "aria-label": name, title: name },
    icon(shape));
  const first = button("first", "First step");
  const back = button("previous", "Previous step");
  const play = button("play", "Play");
  const forward = button("next", "Next step");
  const lastBtn = button("last", "Last step");
  const scrubber = el("input", { type: "range", min: "0", max: "0", step: "1", value: "0", "aria-label": `${label}: step` });
  const count = el("span", { class: "ilab-timeline__count", text: "No steps yet" });
  const speed = el("select", { class: "ilab-timeline__speed", "aria-label": "Steps per second while playing" },
    ...Object.entries(PLAY_RATES).map(([name, ms]) => el("option", { value: String(ms), text: name })));
  speed.value = "250";
  const caption = el("p", { class: "ilab-timeline__caption", role: "status", "aria-live": "polite" });
  const element = el("div", { class: "ilab-timeline", role: "group", "aria-label": `${label}: step through the run`, hidden: true },
    scrubber, el("div", { class: "ilab-timeline__bar" },
      el("div", { class: "ilab-timeline__buttons" }, first, back, play, forward, lastBtn), el("span", {}, count, " ", speed)),
    caption);

  let frame = 0;
  let timer = 0;
  let drawn = null; // the step last drawn: a new step arriving while the student looks at an old one redraws nothing

  function paint() {
    frame = 0;
    const n = log.steps.length;
    element.hidden = n === 0;
    scrubber.max = String(Math.max(0, n - 1));
    scrubber.value = String(Math.max(0, log.index));
    scrubber.setAttribute("aria-valuetext", n ? `Step ${log.index + 1} of ${n}` : "No steps");
    count.textContent = n ? `Step ${log.index + 1} of ${n}` : "No steps yet";
    element.dataset.step = String(log.index);
    element.dataset.steps = String(n);
    first.disabled = back.disabled = log.index <= 0;
    forward.disabled = lastBtn.disabled = log.index >= log.last;
    play.disabled = n < 2;
    const step = log.current;
    caption.textContent = step ? step.caption || "" : "";
    if (step && step !== drawn) draw(step, log.index, log.steps);
    drawn = step;
    element.dispatchEvent(new CustomEvent("ilab:step", { bubbles: true, detail: { index: log.index, steps: n } }));
  }

  /** Repaint on the next animation frame (many seeks in one frame draw once). */
  function schedule() {
    if (frame) return;
    frame = (typeof requestAnimationFrame === "function" ? requestAnimationFrame : (f) => setTimeout(f, 16))(paint);
  }

  function stop() {
    if (!timer) return;
    clearInterval(timer);
    timer = 0;
    play.replaceChildren(icon("play"));
    play.setAttribute("aria-label", "Play");
    play.title = "Play";
  }

  function start() {
    if (log.steps.length < 2) return;
    if (log.index >= log.last) log.seek(0);
    play.replaceChildren(icon("pause"));
    play.setAttribute("aria-label", "Pause");
    play.title = "Pause";
    timer = setInterval(() => {
      if (log.index >= log.last) { stop(); return; }
      log.seek(log.index + 1);
      schedule();
    }, Number(speed.value));
    schedule();
  }

  const seek = (i) => { if (log.seek(i)) schedule(); };
  const byUser = (fn) => () => { stop(); fn(); };
  first.addEventListener("click", byUser(() => seek(0)));
  back.addEventListener("click", byUser(() => seek(log.index - 1)));
  forward.addEventListener("click", byUser(() => seek(log.index + 1)));
  lastBtn.addEventListener("click", byUser(() => seek(log.last)));
  play.addEventListener("click", () => (timer ? stop() : start()));
  speed.addEventListener("change", () => { if (timer) { stop(); start(); } });
  scrubber.addEventListener("input", () => { stop(); seek(scrubber.value); });
  element.addEventListener("keydown", (e) => {
    if (e.target === speed) return;
    if (e.key === " " && e.target !== play && e.target.tagName !== "BUTTON") { e.preventDefault(); timer ? stop() : start(); }
  });
  element.addEventListener("ilab:seek", (e) => { stop(); seek(e.detail && e.detail.step); });

  return {
    element,
    log,
    /** Add one step (a live event, or a replayed one); drawn at once while following. */
    push(step) { log.push(step); schedule(); },
    /** Forget the run (a new one starts). */
    reset() { stop(); log.reset(); schedule(); },
    seek(i) { stop(); seek(i); },
    play: start,
    pause: stop,
  };
}
