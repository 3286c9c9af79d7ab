// "On this page": mark the section being read with aria-current="location" as the learner scrolls
// (the last heading that has passed under the top of the viewport, below the sticky player).
const outline = document.querySelector("nav.outline");
const links = outline ? Array.from(outline.querySelectorAll('a[href^="#"]')) : [];
const targets = links.map((link) => document.getElementById(decodeURIComponent(link.hash.slice(1)))).filter(Boolean);

function markCurrent() {
  const offset = (parseFloat(getComputedStyle(document.documentElement).getPropertyValue("--player-height")) || 0) + 24;
  let current = targets[0];
  for (const target of targets) {
    if (target.getBoundingClientRect().top - offset <= 0) current = target;
  }
  for (const link of links) {
    if (current && link.hash === `#${current.id}`) link.setAttribute("aria-current", "location");
    else link.removeAttribute("aria-current");
  }
}

if (targets.length && "IntersectionObserver" in window) {
  // Headings crossing the top band trigger a recount; no work on every scroll event.
  const observer = new IntersectionObserver(markCurrent, { rootMargin: "0px 0px -60% 0px", threshold: [0, 1] });
  for (const target of targets) observer.observe(target);
  window.addEventListener("hashchange", () => requestAnimationFrame(markCurrent));
  markCurrent();
}
