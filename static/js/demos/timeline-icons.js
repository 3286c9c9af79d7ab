// The step timeline's button icons as inline SVG: the media glyphs (⏮ ⏭ ⏸) are missing from the fonts a plain
// Linux machine has, where they drew as empty boxes. Each icon is decorative (aria-hidden): the button's
// aria-label names it. Drawn in currentColor, so a disabled or hovered button's colour applies.
const SVG = "http://www.w3.org/2000/svg";

// 16 × 16 paths: bars and triangles, readable at 1em.
const PATHS = {
  first: "M2 3h2v10H2zM9 3v10L4 8zM15 3v10l-5-5z", // |◀◀
  previous: "M3 3h2v10H3zM12 3v10L6 8z", // |◀
  play: "M4 2.5v11L13 8z", // ▶
  pause: "M3.5 3h3v10h-3zM9.5 3h3v10h-3z", // ❚❚
  next: "M4 3v10l6-5zM11 3h2v10h-2z", // ▶|
  last: "M1 3v10l5-5zM7 3v10l5-5zM12 3h2v10h-2z", // ▶▶|
};

/** An <svg> drawing icon `name` (a key of PATHS), hidden from assistive technology. */
export function icon(name) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("width", "16");
  svg.setAttribute("height", "16");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  svg.setAttribute("class", "ilab-icon");
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", PATHS[name]);
  path.setAttribute("fill", "currentColor");
  svg.append(path);
  return svg;
}
