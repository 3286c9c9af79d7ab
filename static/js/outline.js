// "On this page": mark the section being read with aria-current="location" as the learner scrolls, and fold
// the outline away on a narrow screen (the lesson's title comes first there; the fold opens on a tap).
//
// The section being read is the last one whose heading has reached the reading line: the top of what the
// learner can see (below the sticky audio player while it is stuck at the top, and below anything else stuck
// there) plus a quarter of the rest of the window, so a heading that has just come up under the player already
// counts. At the page's end, the last section (a short one like "Sources" never brings its heading that high),
// unless the learner jumped to a section that is in view there.
// Recounted on every scroll (once per frame): an IntersectionObserver band only fires when a heading crosses its
// edges, not when it crosses the reading line, which left the mark a section or two behind.
const outline = document.querySelector("nav.outline");
const links = outline ? Array.from(outline.querySelectorAll('a[href^="#"]')) : [];
const targets = links.map((link) => document.getElementById(decodeURIComponent(link.hash.slice(1)))).filter(Boolean);
const fold = outline ? outline.querySelector("details.outline-fold") : null;
const wide = window.matchMedia("(min-width: 901px)");

/** Open beside the lesson on a wide screen; folded (one "On this page" line) on a narrow one. */
function setFold() {
  if (fold) fold.open = wide.matches;
}

/** The bottom of whatever is stuck to the top of the window (the audio player), else 0. */
function stuckBottom() {
  let bottom = 0;
  for (const node of document.querySelectorAll(".player, .site-header")) {
    const style = getComputedStyle(node);
    if (style.position !== "sticky" && style.position !== "fixed") continue;
    const rect = node.getBoundingClientRect();
    if (rect.height && rect.top <= parseFloat(style.top || "0") + 1 && rect.bottom > 0) bottom = Math.max(bottom, rect.bottom);
  }
  return bottom;
}

export function readingLine() {
  const top = stuckBottom();
  return top + Math.min(200, (window.innerHeight - top) * 0.25);
}

function markCurrent() {
  const line = readingLine();
  let current = targets[0];
  for (const target of targets) {
    if (target.getBoundingClientRect().top <= line) current = target;
  }
  const page = document.scrollingElement;
  const last = targets[targets.length - 1];
  if (page.scrollTop > 0 && page.scrollTop + window.innerHeight >= page.scrollHeight - 2
      && last.getBoundingClientRect().top < window.innerHeight) {
    const jumped = targets.find((t) => location.hash === `#${t.id}`);
    const top = jumped ? jumped.getBoundingClientRect().top : -1;
    current = jumped && top >= 0 && top < window.innerHeight ? jumped : last;
  }
  for (const link of links) {
    if (current && link.hash === `#${current.id}`) link.setAttribute("aria-current", "location");
    else link.removeAttribute("aria-current");
  }
}

let queued = false;
function schedule() {
  if (queued) return;
  queued = true;
  requestAnimationFrame(() => { queued = false; markCurrent(); });
}

setFold();
wide.addEventListener("change", setFold);
if (targets.length) {
  window.addEventListener("scroll", schedule, { passive: true });
  window.addEventListener("resize", schedule);
  window.addEventListener("hashchange", schedule);
  markCurrent();
}
