// A demo's stage: its main picture and the step timeline that redraws it, kept in view together (issue 39: after
// Run the picture was below the fold, and at 390 px most demos could not show scrubber and picture at once).
// The stage takes the picture's place in the demo's layout (a whole row of a chart grid) with the timeline under
// it; the timeline sticks to the bottom of the window while any of the stage shows, so the scrubber stays docked
// under the visible part of a picture taller than the window. A demo names its picture as `steps.picture`
// (course-demo-kit.js): an element, adjacent elements, or a function returning them once they are in the page.
import { el } from "../calculators/ui.js";

const STYLE_ID = "ilab-stage-style";
// Parts of a picture that set their own z-index (Plotly's layers, overlays) are isolated, so none paints over the
// docked timeline. scroll-margin-top clears the lesson's sticky audio player (player.js sets --player-height).
const CSS = `
.ilab-stage { grid-column: 1 / -1; min-width: 0; scroll-margin-top: calc(var(--player-height, 0px) + .5rem); scroll-margin-bottom: .25rem; }
.ilab-stage > :not(.ilab-timeline) { isolation: isolate; }
.ilab-stage > .ilab-timeline { position: sticky; bottom: 0; z-index: 3; box-shadow: 0 -3px 10px rgba(15, 23, 42, .12); }
`;

function injectStyle() {
  if (document.getElementById(STYLE_ID)) return;
  document.head.append(el("style", { id: STYLE_ID, text: CSS }));
}

const reducedMotion = () => Boolean(window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches);

/** The top of the window not covered by a sticky bar (the lesson's audio player publishes its height). */
function topInset() {
  return parseFloat(getComputedStyle(document.documentElement).getPropertyValue("--player-height")) || 0;
}

/**
 * Scroll `stage` into view unless its picture already shows: a stage that fits the window is shown whole (the
 * least scrolling that does it), a taller one from its top (its picture first, the timeline docked below).
 * Returns true when it scrolled. Smooth unless the student asked for reduced motion.
 */
export function revealStage(stage) {
  if (!stage || !stage.isConnected) return false;
  const box = stage.getBoundingClientRect();
  const top = topInset();
  const room = window.innerHeight - top;
  const tall = box.height > room;
  const shown = tall ? box.top >= top - 1 && box.top < top + room / 3 : box.top >= top - 1 && box.bottom <= window.innerHeight + 1;
  if (shown || box.height === 0) return false;
  stage.scrollIntoView({ block: tall ? "start" : "nearest", behavior: reducedMotion() ? "auto" : "smooth" });
  return true;
}

/** A stage holding `timeline` (its element); `dock(picture)` moves it to the picture and the picture into it. */
export function demoStage(timeline) {
  injectStyle();
  const element = el("div", { class: "ilab-stage" }, timeline);
  let docked = false;
  // Whether the student has moved the page (or may have: a key, a touch, a click) since reveal(): settle()
  // then leaves the page where they put it.
  let moved = true;
  const INTENT = ["wheel", "touchmove", "keydown", "pointerdown"];
  const onIntent = () => { moved = true; forget(); };
  const forget = () => INTENT.forEach((type) => window.removeEventListener(type, onIntent, true));
  return {
    element,
    /** Put the picture (see above) in the stage, above the timeline, where the picture was. False while the
     * picture is not in the page yet (call again later); a stage without one keeps the timeline where it is. */
    dock(picture) {
      if (docked || !picture) return docked;
      const nodes = [].concat(typeof picture === "function" ? picture() : picture).filter(Boolean);
      if (!nodes.length || !nodes[0].isConnected) return false;
      nodes[0].replaceWith(element);
      element.prepend(...nodes);
      element.dataset.docked = "true";
      docked = true;
      return true;
    },
    /** Bring the stage into view (the student's run has its first step). */
    reveal() {
      forget();
      moved = false;
      INTENT.forEach((type) => window.addEventListener(type, onIntent, { capture: true, passive: true }));
      revealStage(element);
    },
    /** The run is done: what it added above the stage (text, numbers, notes) may have pushed the stage down;
     * bring it back unless the student moved the page since reveal(). */
    settle() {
      if (!moved) revealStage(element);
      moved = true;
      forget();
    },
  };
}
