// Shared DOM helpers for the course calculators and demos: elements, labelled fields, Plotly loading, styles.
// Every control gets a visible <label>; every chart gets role="img", an aria-label and a text summary that
// is updated with the numbers (screen readers read the summary, not the plot).

const STYLE_ID = "ilab-calc-style";
const CSS = `
.ilab-calc { border: 1px solid #d0d7de; border-radius: 8px; padding: 1rem; margin: 1rem 0; background: #fff; max-width: 100%; min-width: 0; }
.ilab-calc input, .ilab-calc select, .ilab-calc textarea { max-width: 100%; min-width: 0; }
.ilab-calc h3 { margin-top: 0; font-size: 1.05rem; }
.ilab-calc fieldset { border: 0; padding: 0; margin: 0; min-width: 0; display: grid; grid-template-columns: repeat(auto-fit, minmax(min(190px, 100%), 1fr)); gap: .7rem; align-items: end; }
.ilab-calc legend { font-weight: 600; margin-bottom: .4rem; }
.ilab-calc label { display: flex; flex-direction: column; gap: .25rem; font-weight: 600; font-size: .9rem; }
.ilab-calc label.ilab-calc__check { flex-direction: row; align-items: center; gap: .45rem; }
.ilab-calc input, .ilab-calc select, .ilab-calc textarea { font: inherit; padding: .3rem; }
.ilab-calc textarea { min-height: 3rem; }
.ilab-calc .ilab-calc__wide { grid-column: 1 / -1; }
.ilab-calc button, .ilab-run, .ilab-stop { font: inherit; padding: .45rem 1.1rem; border-radius: 6px; border: 1px solid #14213d; cursor: pointer; background: #14213d; color: #fff; }
.ilab-calc button[data-secondary], .ilab-stop { background: #fff; color: #14213d; }
.ilab-calc button:disabled, .ilab-run:disabled, .ilab-stop:disabled { opacity: .5; cursor: not-allowed; }
.ilab-calc__out { display: grid; grid-template-columns: repeat(auto-fit, minmax(160px, 1fr)); gap: .4rem; margin: .8rem 0; }
.ilab-calc__out div { background: #f6f8fa; border-radius: 6px; padding: .35rem .5rem; }
.ilab-calc__out dt { font-size: .75rem; color: #555; }
.ilab-calc__out dd { margin: 0; font-weight: 600; font-variant-numeric: tabular-nums; }
.ilab-calc table { border-collapse: collapse; width: 100%; margin: .6rem 0; font-variant-numeric: tabular-nums; font-size: .9rem; display: block; overflow-x: auto; }
.ilab-calc th small { font-weight: 400; color: #555; }
.ilab-calc th, .ilab-calc td { border-bottom: 1px solid #e5e7eb; padding: .3rem .5rem; text-align: right; }
.ilab-calc th:first-child, .ilab-calc td:first-child { text-align: left; }
.ilab-calc__chart { min-height: 320px; max-width: 100%; position: relative; }
.ilab-calc__charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(360px, 100%), 1fr)); gap: .75rem; }
.ilab-calc__charts > *, .ilab-calc figure { min-width: 0; margin: 0; }
.ilab-calc__chart[data-empty="true"]::before, .ilab-kv__chart[data-empty="true"]::before {
  content: "Run the demo to draw this chart."; position: absolute; inset: 0; z-index: 5; display: grid; place-items: center;
  color: #555; background: #f6f8fa; border: 1px dashed #c4cad1; border-radius: 6px; font-size: .95rem; }
.ilab-calc__summary { font-size: .9rem; color: #333; }
.ilab-calc__status { min-height: 1.3em; color: #444; }
.ilab-calc__status.is-error { color: #b00020; font-weight: 600; }
.ilab-calc__text { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; white-space: pre-wrap; background: #f6f8fa; padding: .6rem; border-radius: 6px; min-height: 2.5em; }
.ilab-calc ol.ilab-calc__recs li { margin: .4rem 0; }
`;

export function injectStyle() {
  if (document.getElementById(STYLE_ID)) return;
  const style = document.createElement("style");
  style.id = STYLE_ID;
  style.textContent = CSS;
  document.head.appendChild(style);
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === null || v === undefined) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

let uid = 0;
export function nextId(prefix) {
  uid += 1;
  return `${prefix}-${uid}`;
}

/** A labelled <select>; options: [[value, text], ...]. Returns {label, input}. */
export function selectField(text, options, value) {
  const id = nextId("ilab-f");
  const input = el("select", { id });
  for (const [v, t] of options) input.append(el("option", { value: v, text: t }));
  if (value !== undefined) input.value = String(value);
  return { label: el("label", { for: id }, text, input), input };
}

/** A labelled number input. */
export function numberField(text, value, { min, max, step = "any", help } = {}) {
  const id = nextId("ilab-f");
  const input = el("input", { id, type: "number", value: String(value), min, max, step, inputmode: "decimal" });
  const label = el("label", { for: id }, text, input);
  if (help) {
    const hid = `${id}-help`;
    input.setAttribute("aria-describedby", hid);
    label.append(el("small", { id: hid, text: help }));
  }
  return { label, input };
}

export function checkField(text, checked) {
  const id = nextId("ilab-f");
  const input = el("input", { id, type: "checkbox" });
  input.checked = Boolean(checked);
  return { label: el("label", { for: id, class: "ilab-calc__check" }, input, text), input };
}

/** A <dl> of named outputs; returns {node, set(key, text)}. */
export function outputs(pairs, ariaLabel) {
  const node = el("dl", { class: "ilab-calc__out", "aria-label": ariaLabel, "aria-live": "polite" });
  const cells = {};
  for (const [key, label] of pairs) {
    const dd = el("dd", { "data-out": key, text: "–" });
    node.append(el("div", {}, el("dt", { text: label }), dd));
    cells[key] = dd;
  }
  return { node, set: (k, v) => { cells[k].textContent = v; } };
}

/** A chart container with an accessible name and a visible text summary below it. */
export function chartBlock(ariaLabel) {
  // Empty until first drawn with data (markEmptyCharts keeps this up to date): CSS shows a friendly note.
  const chart = el("div", { class: "ilab-calc__chart", role: "img", "aria-label": ariaLabel, "data-empty": "true" });
  const summary = el("p", { class: "ilab-calc__summary", "aria-live": "polite" });
  const figure = el("figure", {}, chart, el("figcaption", {}, summary));
  return { figure, chart, summary };
}

let plotlyPromise = null;
export function ensurePlotly(url) {
  if (window.Plotly) return Promise.resolve(markEmptyCharts(window.Plotly));
  if (!plotlyPromise) {
    plotlyPromise = new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = url || new URL("../../vendor/plotly.min.js", import.meta.url).href;
      s.onload = () => resolve(markEmptyCharts(window.Plotly));
      s.onerror = () => reject(new Error("could not load the chart library"));
      document.head.appendChild(s);
    });
  }
  return plotlyPromise;
}

// No mode bar: on a narrow chart it covers the title (drag still zooms, a double click resets).
export const PLOT_CONFIG = { responsive: true, displaylogo: false, displayModeBar: false };
export const BASE_LAYOUT = { margin: { l: 60, r: 15, t: 56, b: 50 }, font: { size: 12 } };

function hasPoints(trace) {
  return ["x", "y", "z", "values"].some((k) => Array.isArray(trace[k]) && trace[k].length > 0);
}

// Plotly's default font, to measure titles before drawing them.
const PLOT_FONT = '"Open Sans", verdana, arial, sans-serif';
let measuring = null;

function textWidth(text, px) {
  measuring = measuring || document.createElement("canvas").getContext("2d");
  measuring.font = `${px}px ${PLOT_FONT}`;
  return measuring.measureText(text.replace(/<[^>]*>/g, "")).width;
}

/** A title in Plotly's markup ("<br>" between lines, a "<sub>" line drawn smaller) broken at spaces into
 * lines at most `room` px wide. */
export function wrapTitle(text, px, room, measure = textWidth) {
  return String(text).split(/<br\s*\/?>/i).map((line) => {
    const sub = /^<sub>(.*)<\/sub>$/i.exec(line.trim());
    const size = sub ? px * 0.7 : px;
    const lines = [];
    let current = "";
    for (const word of (sub ? sub[1] : line).split(" ")) {
      const longer = current ? `${current} ${word}` : word;
      if (current && measure(longer, size) > room) {
        lines.push(current);
        current = word;
      } else current = longer;
    }
    lines.push(current);
    return lines.map((l) => (sub ? `<sub>${l}</sub>` : l)).join("<br>");
  }).join("<br>");
}

const TITLE_PAD = 8;
const lineCount = (text) => String(text).split(/<br\s*\/?>/i).length;

/** Titles that would be clipped at this chart's width (a phone) wrap onto more lines: the chart's title
 * within the figure, each axis title within the room around its axis' middle. */
function wrapTitles(layout, gd) {
  const width = gd && gd.clientWidth;
  if (!width) return;
  const fontPx = (layout.font && layout.font.size) || 12;
  const margin = { ...BASE_LAYOUT.margin, ...(layout.margin || {}) };
  const title = typeof layout.title === "string" ? { text: layout.title } : layout.title;
  if (title && title.text) {
    const px = (title.font && title.font.size) || Math.round(fontPx * 1.4);
    // A layout read back from the chart (`{...gd.layout, …}`) carries the wrapped title and the grown margin.
    const memo = gd.ilabTitle;
    const source = memo && title.text === memo.wrapped ? memo.source : title.text;
    const text = wrapTitle(source, px, width - 24);
    const top = layout.margin && typeof layout.margin.t === "number" ? layout.margin.t : null;
    if (text === source || top === null) {
      layout.title = { ...title, text };
    } else {
      // A wrapped title hangs from the top edge and the plot moves down below its last line. (Plotly anchors
      // a multi-line title by its first line, drawn about 0.7 em above a "top" anchor, the rest below it.)
      const base = memo && top === memo.top ? memo.base : top;
      const grown = Math.max(base, Math.ceil(TITLE_PAD + lineCount(text) * px * 1.3 + 12));
      const height = layout.height || gd.clientHeight || 450;
      const anchor = TITLE_PAD + 0.7 * px + 3;
      layout.title = { ...title, text, yref: "container", y: 1 - anchor / height, yanchor: "top" };
      layout.margin = { ...layout.margin, t: grown };
      gd.ilabTitle = { source, wrapped: text, base, top: grown };
    }
  }
  const height = layout.height || gd.clientHeight || 320;
  for (const [key, axis] of Object.entries(layout)) {
    if (!/^[xy]axis\d*$/.test(key) || !axis || !axis.title) continue;
    const axisTitle = typeof axis.title === "string" ? { text: axis.title } : axis.title;
    if (!axisTitle.text) continue;
    const px = (axisTitle.font && axisTitle.font.size) || Math.round(fontPx * 1.2);
    let room;
    if (key.startsWith("x")) {
      const middle = margin.l + (width - margin.l - margin.r) / 2;
      room = 2 * Math.min(middle, width - middle) - 16;
    } else room = height - margin.t - margin.b - 8;
    axis.title = { ...axisTitle, text: wrapTitle(axisTitle.text, px, Math.max(room, 60)) };
  }
}

/** Legend entries too long for a narrow chart wrap onto more lines (the traces are copied, not changed). */
function fitLegendNames(data, layout, gd) {
  const width = gd && gd.clientWidth;
  if (!width || !Array.isArray(data)) return data;
  const px = (layout && layout.legend && layout.legend.font && layout.legend.font.size)
    || (layout && layout.font && layout.font.size) || 12;
  const room = width - 60; // the legend's symbol and padding
  return data.map((trace) => (trace && typeof trace.name === "string" && textWidth(trace.name, px) > room
    ? { ...trace, name: wrapTitle(trace.name, px, room) } : trace));
}

/** How many rows a horizontal legend takes at this chart's width: each entry is its name plus its symbol. */
function legendRows(data, layout, gd) {
  const width = (gd && gd.clientWidth) || 0;
  const names = (Array.isArray(data) ? data : []).filter((t) => t && t.showlegend !== false && typeof t.name === "string")
    .map((t) => t.name);
  if (!width || !names.length) return 1;
  const px = (layout.legend && layout.legend.font && layout.legend.font.size) || (layout.font && layout.font.size) || 12;
  let rows = 1;
  let used = 0;
  for (const name of names) {
    const lines = String(name).split(/<br\s*\/?>/i);
    const entry = Math.max(...lines.map((l) => textWidth(l, px))) + 46;
    if (used && used + entry > width - 10) { rows += 1; used = 0; }
    used += entry;
    rows += lines.length - 1;
  }
  return rows;
}

/** Narrow charts (a phone) keep their titles, tick labels and legends: long titles wrap, every axis grows
 * its margin to fit its labels, and a horizontal legend below the plot sits at the figure's bottom edge,
 * under the x-axis title rather than on it. */
function fitToWidth(layout, gd, data = []) {
  if (!layout || typeof layout !== "object") return layout;
  wrapTitles(layout, gd);
  for (const key of ["xaxis", "yaxis"]) if (!layout[key]) layout[key] = {};
  for (const [key, axis] of Object.entries(layout)) {
    if (/^[xy]axis\d*$/.test(key) && axis && typeof axis === "object" && axis.automargin === undefined) {
      axis.automargin = true;
    }
  }
  const legend = layout.legend;
  if (legend && legend.orientation === "h" && typeof legend.y === "number" && legend.y < 0) {
    layout.legend = { ...legend, x: 0, xanchor: "left", yref: "container", y: 0, yanchor: "bottom" };
    layout.margin = { ...(layout.margin || BASE_LAYOUT.margin) };
    layout.margin.b = (layout.margin.b ?? 50) + 20 + 20 * legendRows(data, layout, gd);
  }
  return layout;
}

/** After every draw, mark a chart with no data points `data-empty` so CSS shows "Run the demo…" instead
 * of bare 0–4 axes; layouts pass through fitToWidth. Wraps the Plotly calls the pages use; returns Plotly. */
function markEmptyCharts(Plotly) {
  if (!Plotly || Plotly.ilabMarksEmpty) return Plotly;
  for (const name of ["newPlot", "react"]) {
    const original = Plotly[name];
    Plotly[name] = (gd, data, layout, ...rest) => {
        const fitted = fitLegendNames(data, layout, gd);
        return original.call(Plotly, gd, fitted, fitToWidth(layout, gd, fitted), ...rest);
      };
  }
  for (const name of ["newPlot", "react", "extendTraces", "addTraces", "deleteTraces"]) {
    const original = Plotly[name];
    Plotly[name] = (gd, ...rest) => {
      const mark = () => { gd.dataset.empty = String(!(gd.data || []).some(hasPoints)); return gd; };
      const result = original.call(Plotly, gd, ...rest);
      return result && typeof result.then === "function" ? result.then(mark) : mark();
    };
  }
  Plotly.ilabMarksEmpty = true;
  return Plotly;
}

/** Parse a container's data-props JSON (the renderer writes it); {} when absent or malformed. */
export function readProps(container) {
  try {
    return JSON.parse(container.dataset.props || "{}") || {};
  } catch {
    return {};
  }
}

const calculators = new Map(); // name → init, for every calculator module this page has loaded

/** Mount every registered calculator under `scope` that is not mounted yet. */
export function mountCalculators(scope = document) {
  for (const [name, init] of calculators) {
    for (const node of scope.querySelectorAll(`.calculator[data-calculator="${name}"]`)) {
      if (node.dataset.mounted) continue;
      node.dataset.mounted = "1";
      injectStyle();
      try {
        init(node, readProps(node));
      } catch (err) {
        node.append(el("p", { class: "ilab-calc__status is-error", text: `Calculator error: ${err.message}` }));
      }
    }
  }
}

/** Register `init(container, props)` for `.calculator[data-calculator=name]` and mount it on the page. */
export function autoMount(name, init) {
  calculators.set(name, init);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => mountCalculators());
  else mountCalculators();
}

export const fmtMs = (s) => (Number.isFinite(s) ? `${(s * 1000).toFixed(s < 0.01 ? 2 : 1)} ms` : "–");
export const fmtNum = (x, d = 3) => (Number.isFinite(x) ? Number(x.toPrecision(d)).toLocaleString("en-US") : "–");

/** x.toFixed(digits), or "–" when x is missing (a stopped run's summary leaves fields out). */
export function fixed(x, digits = 1) {
  return typeof x === "number" && Number.isFinite(x) ? x.toFixed(digits) : "–";
}
