// Attention weights for your prompt (the primer): one head of one layer of the real model, as a heatmap with a
// row per query token and a column per key token. Cells above the diagonal are the causal mask (a token never
// attends to a later one) and are drawn as hatched grey, not as zero weight. A table lists, for every token, the
// tokens it attends to most, so the numbers are there without the picture.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, el, numberField, fixed } from "../calculators/ui.js";
import { demoShell, intIn, promptField } from "./course-demo-kit.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";

const MASKED = "#d1d5db"; // masked cells: the plot's background shows through (grey, darker than a zero weight)
// White for no weight to dark blue for all of it (Plotly's own "Blues" runs the other way).
const WEIGHT_COLORS = [[0, "#ffffff"], [0.25, "#c6dbef"], [0.5, "#6baed6"], [0.75, "#2171b5"], [1, "#08306b"]];

/** "3: ␣cat": position and token, with a visible mark for a leading space (labels must be unique for Plotly). */
export function tokenLabel(text, i) {
  const shown = String(text).replace(/\n/g, "⏎").replace(/^ /, "␣");
  return `${i}: ${shown}`;
}

/** The k keys a query row weighs most, largest first: [{j, w}]. */
export function topKeys(row, k = 2) {
  return row.map((w, j) => ({ j, w })).sort((a, b) => b.w - a.w).slice(0, k);
}

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/attention.py), embedded in the page.
  const sp = specParams(config);
  const prompt = promptField(`Prompt (at most ${sp.param("prompt").max_tokens} tokens)`, sp.value("prompt"));
  const layer = numberField("Layer", sp.value("layer"), sp.range("layer", { step: 1, help: `0 is the first of ${sp.max("layer") + 1}` }));
  const head = numberField("Head", sp.value("head"), sp.range("head", { step: 1, help: `one of ${sp.max("head") + 1} query heads` }));
  const heat = chartBlock("Heatmap of attention weights: one row per query token, one column per key token; cells above the diagonal are masked");
  const table = el("table", { class: "ilab-calc__table" }, el("caption", { text: "What each token attends to most" }),
    el("thead", {}, el("tr", {}, ...["Query token", "Strongest key (weight)", "Next (weight)"].map((t) => el("th", { scope: "col", text: t })))),
    el("tbody"));
  let Plotly = null;

  const shell = demoShell(root, config, {
    title: "Attention weights",
    fields: [prompt.label, layer.label, head.label],
    getParams() {
      if (!prompt.input.value.trim()) throw new Error("Enter a prompt first.");
      return { prompt: prompt.input.value, layer: intIn(layer.input, "Layer", sp.min("layer"), sp.max("layer")),
        head: intIn(head.input, "Head", sp.min("head"), sp.max("head")) };
    },
    onStart(params) {
      fillForm({ prompt: prompt.input, layer: layer.input, head: head.input }, params); // a resumed run's own settings
      table.querySelector("tbody").replaceChildren();
      heat.summary.textContent = "";
    },
    onEvent(ev) {
      if (ev.type === "attention_weights") show(ev);
    },
  });
  shell.body.append(heat.figure, table);
  shell.plotly.then((P) => { Plotly = P; });

  function show(ev) {
    const labels = ev.tokens.map(tokenLabel);
    const n = labels.length;
    // Masked cells (key after query) are null: Plotly leaves them empty, over the grey plot background.
    const z = ev.weights.map((row, i) => row.map((w, j) => (j > i ? null : w)));
    const rows = table.querySelector("tbody");
    rows.replaceChildren(...ev.weights.map((row, i) => {
      const [a, b] = topKeys(row.slice(0, i + 1));
      const cell = (x) => (x ? `${labels[x.j]} (${fixed(x.w, 2)})` : "–");
      return el("tr", {}, el("th", { scope: "row", text: labels[i] }), el("td", { text: cell(a) }), el("td", { text: cell(b) }));
    }));
    const onFirst = ev.weights.slice(1).filter((row) => row[0] >= 0.5).length;
    const onPrev = ev.weights.slice(1).filter((row, i) => topKeys(row.slice(0, i + 2), 1)[0].j === i).length;
    heat.summary.textContent = `Layer ${ev.layer}, head ${ev.head} (it shares key/value head ${ev.kv_head} with ` +
      `${ev.n_heads / ev.n_kv_heads - 1} other query heads), ${n} tokens. Each row sums to 1; grey cells are masked. ` +
      `Of the ${n - 1} tokens after the first, ${onPrev} attend most to the token just before them and ${onFirst} ` +
      "put at least half their weight on the first token.";
    if (!Plotly) return;
    const tick = Math.max(8, Math.min(12, Math.round(260 / n)));
    Plotly.react(heat.chart, [{
      type: "heatmap", z, x: labels, y: labels, zmin: 0, zmax: 1, colorscale: WEIGHT_COLORS, xgap: 1, ygap: 1,
      colorbar: { title: { text: "weight", side: "right" }, thickness: 10, len: 0.8 },
      hovertemplate: "query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>",
    }], {
      ...BASE_LAYOUT,
      title: { text: `Who attends to whom<br><sub>layer ${ev.layer}, head ${ev.head} · grey: masked</sub>` },
      height: Math.max(320, Math.min(640, 180 + 16 * n)),
      plot_bgcolor: MASKED,
      xaxis: { title: { text: "key token (attended to)" }, tickangle: -60, tickfont: { size: tick }, automargin: true, type: "category" },
      yaxis: { title: { text: "query token" }, autorange: "reversed", tickfont: { size: tick }, automargin: true, type: "category" },
    }, PLOT_CONFIG);
  }
  return shell;
}
