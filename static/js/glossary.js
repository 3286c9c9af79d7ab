// Glossary terms in a lesson: the first mention of each term links to its entry on the glossary page and
// shows the definition on hover or keyboard focus (aria-describedby, so screen readers hear it too).
// Escape hides a shown definition without moving the pointer or the focus (WCAG 1.4.13); it shows again
// once the pointer or the focus has left the term and comes back.
// Terms come from the glossary module (courseapp/glossary.py) as JSON in #glossary-terms.

const SKIP = "a, .glossary-tip, code, pre, math, h1, h2, h3, h4, h5, h6, .ilab-demo, .calculator, .quiz, .callout-title, button, label, script, style";
const GLOSSARY_PATH = "/modules/glossary/";

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** One regexp per term: abbreviations ("GQA") match case-sensitively, other names in any case. */
export function termPattern(names) {
  const isAbbreviation = (name) => !/[a-z]/.test(name);
  const exact = names.filter(isAbbreviation).map(escapeRegExp);
  const loose = names.filter((name) => !isAbbreviation(name)).map(escapeRegExp);
  return {
    exact: exact.length ? new RegExp(`(?<![\\w-])(?:${exact.join("|")})(?![\\w-])`) : null,
    loose: loose.length ? new RegExp(`(?<![\\w-])(?:${loose.join("|")})(?![\\w-])`, "i") : null,
  };
}

function firstMatch(text, pattern) {
  const found = [pattern.exact, pattern.loose].filter(Boolean).map((re) => re.exec(text)).filter(Boolean);
  return found.sort((a, b) => a.index - b.index)[0] || null;
}

function textNodes(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: (node) => (node.parentElement.closest(SKIP) || !node.nodeValue.trim()
      ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
  });
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  return nodes;
}

function linkTerm(node, match, term, index) {
  const after = node.splitText(match.index);
  after.splitText(match[0].length);
  const tip = document.createElement("span");
  tip.className = "glossary-tip";
  tip.id = `glossary-tip-${index}`;
  tip.setAttribute("role", "tooltip");
  tip.textContent = `${term.term}: ${term.definition}`;
  const link = document.createElement("a");
  link.className = "glossary-term";
  link.href = `${GLOSSARY_PATH}#${term.anchor}`;
  link.setAttribute("aria-describedby", tip.id);
  link.textContent = match[0];
  const wrap = document.createElement("span");
  wrap.className = "glossary-wrap";
  wrap.append(link, tip);
  after.replaceWith(wrap);
}

/** Link the first mention of every term in `root` (longer names first, so "KV cache" wins over "cache"). */
export function linkTerms(root, terms) {
  const ordered = [...terms].sort((a, b) => Math.max(...b.names.map((n) => n.length)) - Math.max(...a.names.map((n) => n.length)));
  ordered.forEach((term, index) => {
    const pattern = termPattern(term.names);
    for (const node of textNodes(root)) {
      const match = firstMatch(node.nodeValue, pattern);
      if (match) {
        linkTerm(node, match, term, index);
        return;
      }
    }
  });
}

/** On the glossary page itself: give every entry its anchor, and bring the linked one into view. */
function anchorEntries(root, terms) {
  const byTerm = new Map(terms.map((t) => [t.term, t.anchor]));
  for (const strong of root.querySelectorAll("li > strong:first-child")) {
    const id = byTerm.get(strong.textContent.trim());
    if (id) strong.parentElement.id = id;
  }
  const target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
  if (target) {
    target.classList.add("is-target");
    target.scrollIntoView();
  }
}

/** Keep a shown definition inside the window: shift it left from its term (a term near the right edge of a
 * phone's screen would open it past the edge), never past the left margin. */
export function placeTip(wrap) {
  const tip = wrap.querySelector(".glossary-tip");
  if (!tip) return;
  tip.style.left = "0px";
  const box = tip.getBoundingClientRect();
  if (!box.width) return; // not shown
  const width = document.documentElement.clientWidth;
  const margin = 8;
  let shift = Math.min(0, width - margin - box.right);
  if (box.left + shift < margin) shift = margin - box.left;
  tip.style.left = `${Math.round(shift)}px`;
}

function placeShownTips(root) {
  const place = (event) => {
    const wrap = event.target.closest && event.target.closest(".glossary-wrap");
    if (wrap) placeTip(wrap);
  };
  root.addEventListener("mouseover", place);
  root.addEventListener("focusin", place);
}

/** Escape closes the definition shown by hover or focus; leaving the term re-arms it. */
export function dismissOnEscape(root) {
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    for (const wrap of root.querySelectorAll(".glossary-wrap:hover, .glossary-wrap:focus-within")) {
      wrap.classList.add("is-dismissed");
    }
  });
  const rearm = (event) => {
    const wrap = event.target.closest && event.target.closest(".glossary-wrap");
    if (wrap && !wrap.contains(event.relatedTarget)) wrap.classList.remove("is-dismissed");
  };
  root.addEventListener("focusout", rearm);
  root.addEventListener("mouseout", rearm);
}

const data = typeof document === "undefined" ? null : document.getElementById("glossary-terms");
const lesson = data && document.getElementById("lesson");
if (lesson) {
  const terms = JSON.parse(data.textContent);
  if (location.pathname === GLOSSARY_PATH) anchorEntries(lesson, terms);
  else {
    linkTerms(lesson, terms);
    placeShownTips(lesson);
    dismissOnEscape(lesson);
  }
}
