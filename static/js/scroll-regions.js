// A box that scrolls sideways (a wide table or code block on a phone, a formula, a class table) must be
// reachable from the keyboard, or its hidden part cannot be read without a mouse (WCAG 2.1.1; axe-core's
// scrollable-region-focusable). Every such box that overflows and holds nothing focusable of its own gets
// tabindex="0", and a name where it has none (a table keeps its role and its caption's name); one that stops
// overflowing (a wider window) is taken out of the tab order again. Rechecked when the page changes (a demo
// fills its tables) and when the window is resized, once per frame.
const CANDIDATES = "pre, table, .math-display, .class-table-wrap, [data-scroll-region]";
const FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex='-1']), [contenteditable='true']";
const NAMES = { PRE: "Code", DIV: "Scrollable content" };

function scrolls(node) {
  const style = getComputedStyle(node);
  const sideways = /auto|scroll/.test(style.overflowX) && node.scrollWidth > node.clientWidth + 1;
  const down = /auto|scroll/.test(style.overflowY) && node.scrollHeight > node.clientHeight + 1;
  return sideways || down;
}

function update(node) {
  const mine = node.dataset.scrollFocus === "on";
  const needs = scrolls(node) && !node.querySelector(FOCUSABLE);
  if (needs && !mine && !node.hasAttribute("tabindex")) {
    node.tabIndex = 0;
    node.dataset.scrollFocus = "on";
    if (node.tagName !== "TABLE" && !node.hasAttribute("role")) {
      node.setAttribute("role", "region");
      if (!node.hasAttribute("aria-label") && !node.hasAttribute("aria-labelledby")) {
        node.setAttribute("aria-label", node.classList.contains("math-display") ? "Formula" : NAMES[node.tagName] || NAMES.DIV);
        node.dataset.scrollFocusNamed = "on";
      }
    }
  } else if (!needs && mine) {
    node.removeAttribute("tabindex");
    delete node.dataset.scrollFocus;
    if (node.getAttribute("role") === "region") node.removeAttribute("role");
    if (node.dataset.scrollFocusNamed) { node.removeAttribute("aria-label"); delete node.dataset.scrollFocusNamed; }
  }
}

let queued = false;
function schedule() {
  if (queued) return;
  queued = true;
  requestAnimationFrame(() => {
    queued = false;
    for (const node of document.querySelectorAll(CANDIDATES)) update(node);
  });
}

new MutationObserver(schedule).observe(document.body, { childList: true, subtree: true, characterData: true });
window.addEventListener("resize", schedule);
window.addEventListener("load", schedule);
schedule();
