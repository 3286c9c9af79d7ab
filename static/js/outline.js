// "On this page": mark the section being read with aria-current="location" as the learner scrolls
// (the last heading that has passed under the top of the viewport, below the sticky player; at the page's end,
// the last section, whose heading a short section like "Sources" never brings to the top).
const outline = document.querySelector("nav.outline");
const links = outline ? Array.from(outline.querySelectorAll('a[href^="#"]')) : [];
const targets = links.map((link) => document.getElementById(decodeURIComponent(link.hash.slice(1)))).filter(Boolean);

function markCurrent() {
  const offset = (parseFloat(getComputedStyle(document.documentElement).getPropertyValue("--player-height")) || 0) + 24;
  let current = targets[0];
  for (const target of targets) {
    if (target.getBoundingClientRect().top - offset <= 0) current = target;
  }
  const page = document.scrollingElement;
  const last = targets[targets.length - 1];
  if (page.scrollTop > 0 && page.scrollTop + window.innerHeight >= page.scrollHeight - 2
      && last.getBoundingClientRect().top < window.innerHeight) {
    // …unless the learner jumped to a section that is in view there ("Check yourself" above a short "Sources").
    const jumped = targets.find((t) => location.hash === `#${t.id}`);
    const top = jumped ? jumped.getBoundingClientRect().top : -1;
    current = jumped && top >= 0 && top < window.innerHeight ? jumped : last;
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
  // Reaching the page's end (the footer fully in view) recounts too: the last section may be the one read.
  const footer = document.querySelector(".site-footer");
  if (footer) new IntersectionObserver(markCurrent, { threshold: [0, 1] }).observe(footer);
  window.addEventListener("hashchange", () => requestAnimationFrame(markCurrent));
  markCurrent();
}
