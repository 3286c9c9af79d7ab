// Class dashboard charts: per-choice answer rates for each quiz question, demo run outcomes per demo.
// The numbers come from the page's json_script (#class-dashboard-data); the tables under each chart hold the
// same numbers, so the charts are role="img" pictures of them. The trace builders below are pure (no DOM) and
// tested under node (tests/js/class-dashboard.test.mjs).
import { BASE_LAYOUT, PLOT_CONFIG, ensurePlotly } from "./calculators/ui.js";

const LABEL_MAX = 48; // characters of a choice's text on the axis; the table has the full text

// The course's colours (static/css/site.css); the fallbacks are the same values, for node and old browsers.
export const DEFAULT_PALETTE = {
  good: "#166534", bad: "#9f1239", accent: "#1d4ed8", muted: "#4d5560", line: "#d6dae0", ink: "#1b1f24",
};

/** Plotly reads axis labels as a subset of HTML: an author's "<b>" or "&" must show as typed. */
export function escapeLabel(text) {
  return String(text).replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

export function shorten(text, max = LABEL_MAX) {
  const flat = String(text).replace(/\s+/g, " ").trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}

/** The share of answers as a whole percent with one decimal; 0 when nobody answered (rate null). */
export function ratePercent(rate) {
  return typeof rate === "number" && Number.isFinite(rate) ? Math.round(rate * 1000) / 10 : 0;
}

// Plotly lists a stack's traces top-down (reversed) by default; keep the order the traces are built in.
const LEGEND = { orientation: "h", y: -0.2, traceorder: "normal" };

const CHOICE_KINDS = [
  { name: "Correct", test: (c) => c.correct, color: "good" },
  { name: "Most-picked wrong", test: (c) => !c.correct && c.top_distractor, color: "bad" },
  { name: "Other wrong", test: (c) => !c.correct && !c.top_distractor, color: "muted" },
];

/** One horizontal bar trace per kind of choice (correct / most-picked wrong / other wrong), so the legend
 * names the colours; every choice is in exactly one trace. */
export function choiceTraces(question, palette = DEFAULT_PALETTE) {
  const traces = [];
  for (const kind of CHOICE_KINDS) {
    const choices = question.choices.filter(kind.test);
    if (!choices.length) continue;
    traces.push({
      type: "bar", orientation: "h", name: kind.name, marker: { color: palette[kind.color] },
      y: choices.map((c) => escapeLabel(shorten(c.label))),
      x: choices.map((c) => ratePercent(c.rate)),
      text: choices.map((c) => `${ratePercent(c.rate)} % (${c.picks})`),
      textposition: "auto",
      hovertemplate: "%{y}: %{x} % of answers<extra></extra>",
    });
  }
  return traces;
}

export function choiceLayout(question) {
  const categories = question.choices.map((c) => escapeLabel(shorten(c.label)));
  return {
    ...BASE_LAYOUT, title: { text: escapeLabel(question.title) }, barmode: "stack",
    margin: { ...BASE_LAYOUT.margin, l: 20 },
    height: 120 + 40 * categories.length,
    xaxis: { title: { text: "% of answers" }, range: [0, 100], fixedrange: true },
    // Authored order top to bottom: the category order is fixed, then reversed (Plotly draws bottom-up).
    yaxis: { categoryorder: "array", categoryarray: categories, autorange: "reversed", fixedrange: true },
    legend: LEGEND,
  };
}

const RUN_OUTCOMES = [
  { key: "done", name: "Done", color: "good" },
  { key: "cancelled", name: "Cancelled", color: "muted" },
  { key: "error", name: "Failed", color: "bad" },
  { key: "in_progress", name: "In progress", color: "accent" },
];

/** Stacked bars: one trace per outcome, one bar per demo; a bar's height is the demo's runs. */
export function demoTraces(demos, palette = DEFAULT_PALETTE) {
  return RUN_OUTCOMES.map((outcome) => ({
    type: "bar", name: outcome.name, marker: { color: palette[outcome.color] },
    x: demos.map((d) => escapeLabel(d.demo)),
    y: demos.map((d) => d[outcome.key] || 0),
    hovertemplate: `%{x}: %{y} ${outcome.name.toLowerCase()}<extra></extra>`,
  }));
}

export function demoLayout() {
  return {
    ...BASE_LAYOUT, title: { text: "Demo runs by outcome" }, barmode: "stack",
    yaxis: { title: { text: "Runs" }, rangemode: "tozero", fixedrange: true },
    xaxis: { fixedrange: true }, legend: LEGEND,
  };
}

/** The course's colours as the page's CSS defines them. */
function cssPalette() {
  const style = getComputedStyle(document.documentElement);
  const palette = { ...DEFAULT_PALETTE };
  for (const name of Object.keys(palette)) {
    const value = style.getPropertyValue(`--${name}`).trim();
    if (value) palette[name] = value;
  }
  return palette;
}

function readData() {
  const node = document.getElementById("class-dashboard-data");
  return node ? JSON.parse(node.textContent) : null;
}

async function draw() {
  const data = readData();
  if (!data) return;
  const Plotly = await ensurePlotly();
  const palette = cssPalette();
  const font = { ...BASE_LAYOUT.font, color: palette.ink };
  for (const question of data.questions) {
    const target = document.getElementById(question.chart_id);
    if (target) Plotly.newPlot(target, choiceTraces(question, palette), { ...choiceLayout(question), font }, PLOT_CONFIG);
  }
  const demos = document.getElementById(data.demos_chart_id);
  if (demos && data.demos.length) Plotly.newPlot(demos, demoTraces(data.demos, palette), { ...demoLayout(), font }, PLOT_CONFIG);
}

if (typeof document !== "undefined") {
  draw().catch((err) => {
    // The tables carry every number; say why the pictures are missing rather than fail silently.
    for (const chart of document.querySelectorAll(".class-chart")) {
      chart.textContent = `Chart unavailable (${err.message}); the table below has the numbers.`;
    }
  });
}
