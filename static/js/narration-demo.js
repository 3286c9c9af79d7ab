// Narration that drives a demo: when the narration reaches a block of the lesson holding a step marker
// (`{step}`kv-cache 3`` in the source; on the page a hidden `.demo-cue` span, courseapp/demo_cues.py), the
// lesson's first embed of that demo (replaying its reference run) moves its step timeline there, by
// dispatching `ilab:seek` on the demo's root (the timeline contract, static/js/demos/timeline.js).
//
// The student can take over at any time: once they move the demo's timeline themselves (scrubber, step
// buttons, play), the narration stops moving it and a note under the timeline says so, with a button to
// follow the narration again (which jumps to the step the narration is at).
//
// "Follow along" scrolls to what is being spoken: for a block that moves a demo, that is the demo's picture and
// its timeline (the demo's stage), not the block's text, which may sit below the demo.
import { revealStage } from "./demos/stage.js";

const NOTE_CSS = `
.narration-drives { display: flex; flex-wrap: wrap; gap: .4rem .6rem; align-items: center; margin: .3rem 0; font-size: .88rem; color: #444; }
.narration-drives button { padding: .15rem .5rem; font-size: .85rem; }
.narration-drives[hidden], .narration-drives button[hidden] { display: none; }
`;
const STYLE_ID = "narration-drives-style";

/** The step markers of `lesson`: Map cue id → [{demo, step}], in page order. */
export function stepCues(lesson) {
  const cues = new Map();
  for (const span of lesson.querySelectorAll(".demo-cue[data-demo][data-step]")) {
    const block = span.closest("[data-cue]");
    const step = Number(span.dataset.step);
    if (!block || !Number.isInteger(step) || step < 0) continue;
    const list = cues.get(block.dataset.cue) || [];
    list.push({ demo: span.dataset.demo, step });
    cues.set(block.dataset.cue, list);
  }
  return cues;
}

function injectStyle() {
  if (document.getElementById(STYLE_ID)) return;
  const style = document.createElement("style");
  style.id = STYLE_ID;
  style.textContent = NOTE_CSS;
  document.head.appendChild(style);
}

/** One demo the narration moves: its root, the note under its timeline, and whether the student took over. */
class DrivenDemo {
  constructor(root) {
    this.root = root;
    this.following = true;
    this.wanted = null; // the step the narration last named
    this.note = null;
    root.dataset.narrationFollow = "true";
    // The timeline appears when the demo mounts (an ES module loaded after this one): attach once it is there.
    const attach = () => {
      const timeline = root.querySelector(".ilab-timeline");
      if (!timeline || this.timeline) return Boolean(this.timeline);
      this.timeline = timeline;
      this.attachNote(timeline);
      // A move by the student (drag, step buttons, play, keys) is theirs: the narration lets go.
      timeline.addEventListener("input", () => this.takeOver());
      timeline.addEventListener("click", (e) => { if (e.target.closest("button")) this.takeOver(); });
      timeline.addEventListener("keydown", (e) => { if (e.key === " ") this.takeOver(); });
      root.addEventListener("submit", () => this.takeOver()); // a run of their own
      // The reference run arrives after the narration may already have named a step: go there then.
      root.addEventListener("ilab:step", (e) => {
        if (this.following && this.wanted !== null && e.detail.index !== this.wanted
            && e.detail.steps > this.wanted && !this.moving) this.seek(this.wanted);
      });
      return true;
    };
    if (!attach()) {
      const observer = new MutationObserver(() => { if (attach()) observer.disconnect(); });
      observer.observe(root, { childList: true, subtree: true });
    }
  }

  attachNote(timeline) {
    injectStyle();
    const text = document.createElement("span");
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = "Follow the narration again";
    button.addEventListener("click", () => this.follow());
    this.note = document.createElement("p");
    this.note.className = "narration-drives";
    this.note.setAttribute("role", "status");
    this.note.setAttribute("aria-live", "polite");
    this.note.append(text, button);
    this.noteText = text;
    this.followButton = button;
    timeline.after(this.note);
    this.render();
  }

  render() {
    this.root.dataset.narrationFollow = String(this.following);
    if (!this.note) return;
    this.noteText.textContent = this.following
      ? "The audio version of this page moves this timeline as it speaks; move it yourself to take over."
      : "You moved the timeline, so the narration no longer moves it.";
    this.followButton.hidden = this.following;
  }

  takeOver() {
    if (!this.following) return;
    this.following = false;
    this.render();
  }

  follow() {
    this.following = true;
    this.render();
    if (this.wanted !== null) this.seek(this.wanted);
  }

  seek(step) {
    this.moving = true;
    this.root.dispatchEvent(new CustomEvent("ilab:seek", { detail: { step, by: "narration" } }));
    this.moving = false;
  }

  /** The narration reached a marker naming `step`. */
  cue(step) {
    this.wanted = step;
    if (this.following) this.seek(step);
  }
}

/** Wire the lesson's step markers to the narration's text track; returns the driven demos by name. */
export function driveDemos(track, lesson) {
  const cues = lesson ? stepCues(lesson) : new Map();
  const demos = new Map();
  for (const list of cues.values()) {
    for (const { demo } of list) {
      if (demos.has(demo)) continue;
      const root = lesson.querySelector(`.demo-embed[data-demo="${CSS.escape(demo)}"] .ilab-demo`);
      if (root) demos.set(demo, new DrivenDemo(root));
    }
  }
  if (!demos.size) return demos;
  let last = null;
  track.addEventListener("cuechange", () => {
    const active = track.activeCues;
    if (!active || !active.length) return;
    const id = active[active.length - 1].id;
    if (id === last) return;
    last = id;
    for (const { demo, step } of cues.get(id) || []) demos.get(demo)?.cue(step);
  });
  return demos;
}

/** Scroll to the block being spoken (player.js, "Follow along"); a block holding a step marker brings its demo's
 * stage into view instead (none of it scrolls while the stage already shows). */
export function showSpoken(lesson, block, reducedMotion) {
  const marker = block.querySelector(".demo-cue[data-demo]");
  const root = marker && lesson.querySelector(`.demo-embed[data-demo="${CSS.escape(marker.dataset.demo)}"] .ilab-demo`);
  const stage = root && root.querySelector(".ilab-stage");
  if (stage) revealStage(stage);
  else block.scrollIntoView({ block: "center", behavior: reducedMotion ? "auto" : "smooth" });
}
