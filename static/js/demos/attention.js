// Attention weights for your prompt (the primer): one head of one layer of the real model, as a heatmap with a
// row per query token and a column per key token. Cells above the diagonal are the causal mask (a token never
// attends to a later one) and are drawn as hatched grey, not as zero weight. A table lists, for every token, the
// tokens it attends to most, so the numbers are there without the picture. Above the heatmap, the prompt's tokens
// with a bar over each: hover or focus a token (arrow keys move along) and the bars show its attention row, as in
// Transformer Explainer; the step timeline walks the query tokens one row at a time, with a caption naming the
// tokens it attends to most. The run carries every head of the layer: "Head shown" switches without a new run.
// Under the heatmap, the step's token walked from Q, K and V to its output (attention-walk.js).
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, el, numberField, fixed } from "../calculators/ui.js";
import { demoShell, intIn, promptField } from "./course-demo-kit.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";
import { attentionWalk } from "./attention-walk.js";

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

/** A token as a caption quotes it: 'cat' (the leading space dropped), '␣' or '⏎' for a blank one. */
export function quoted(text) {
  const t = String(text).trim();
  return `'${t || (String(text).includes("\n") ? "⏎" : "␣")}'`;
}

/** Head `head`'s rows from an `attention_weights` event, each padded to the prompt's length with 0 (the causal
 * mask): the chosen head's full `weights`, any other from `all_heads` (lower triangles). */
export function headRows(ev, head) {
  if (head === ev.head || !ev.all_heads) return ev.weights;
  const n = ev.tokens.length;
  return ev.all_heads[head].map((row) => row.concat(new Array(n - row.length).fill(0)));
}

/** The caption of query row i: the one or two earlier tokens it attends to most, with their weights. */
export function rowCaption(tokens, row, i) {
  const [a, b] = topKeys(row.slice(0, i + 1));
  const who = quoted(tokens[i]);
  if (i === 0) return `${who} is the first token: it can only attend to itself (${fixed(a.w, 2)}).`;
  const second = b && b.w >= 0.005 ? ` and ${quoted(tokens[b.j])} (${fixed(b.w, 2)})` : "";
  return `${who} attends most to ${quoted(tokens[a.j])} (${fixed(a.w, 2)})${second}.`;
}

/** One timeline step per query token of head `head` (default: the head the run chose): step i is row i. */
export function attentionSteps(ev, head = ev && ev.head) {
  if (!ev || ev.type !== "attention_weights") return null;
  const rows = headRows(ev, head);
  return rows.map((row, i) => ({ caption: rowCaption(ev.tokens, row, i), query: i, head, row: row.slice(0, i + 1) }));
}

const STYLE_ID = "ilab-attn-style";
const CSS = `
.ilab-attn__bar-row { display: flex; flex-wrap: wrap; gap: .15rem; align-items: flex-end; margin: .4rem 0 .8rem; }
.ilab-calc .ilab-attn__bar-row button.ilab-attn__tok { display: flex; flex-direction: column; align-items: stretch; min-width: 1.6rem;
  padding: 0 .1rem .1rem; border: 1px solid transparent; border-radius: 4px; background: none; color: inherit; font: inherit;
  font-size: .85rem; cursor: pointer; }
.ilab-calc .ilab-attn__bar-row button.ilab-attn__tok[aria-pressed=true] { border-color: #d62728; background: #fdf0f0; }
.ilab-calc .ilab-attn__bar-row button.ilab-attn__tok:focus-visible { outline: 2px solid #2171b5; outline-offset: 1px; }
.ilab-attn__well { height: 48px; display: flex; align-items: flex-end; border-bottom: 1px solid #999; }
.ilab-attn__bar { width: 100%; background: #2171b5; height: 0; }
.ilab-attn__tok[data-masked=true] .ilab-attn__well { background: repeating-linear-gradient(45deg, #e5e7eb 0 3px, transparent 3px 6px); }
.ilab-attn__text { white-space: pre; font-family: ui-monospace, monospace; padding-top: .1rem; }
.ilab-attn__head { font-size: .9rem; max-width: 100%; }
`;

function injectAttnStyle() {
  if (document.getElementById(STYLE_ID)) return;
  const style = document.createElement("style");
  style.id = STYLE_ID;
  style.textContent = CSS;
  document.head.appendChild(style);
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
  injectAttnStyle();
  const headPick = el("select", { class: "ilab-attn__head", "aria-label": "Head shown (no new run)" });
  const tokens = el("div", { class: "ilab-attn__bar-row", role: "toolbar",
    "aria-label": "Prompt tokens: hover or focus one (arrow keys move) to see its attention row as bars" });
  const rowView = el("div", { class: "ilab-attn__view", hidden: true },
    el("label", {}, "Head shown (all heads of this layer came with the run) ", headPick),
    el("p", { class: "ilab-calc__summary", text: "Bars over each token: how much the selected token (outlined in red, as its row in the heatmap) attends to it; hatched: later tokens, masked." }), tokens);
  const walk = attentionWalk(); // Q, K, V → scores → softmax → weighted sum for the row shown
  let Plotly = null;
  let run = null; // the attention_weights event drawn
  let buttons = [];

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
      rowView.hidden = true;
      run = null;
      walk.show(null, null);
    },
    onEvent(ev) {
      if (ev.type === "attention_weights") { run = ev; buildTokens(ev); show(ev, ev.head); }
    },
    steps: { fromEvent: attentionSteps, draw: drawRow, picture: () => [rowView, heat.figure] },
  });
  shell.body.append(rowView, heat.figure, walk.node, table);
  shell.plotly.then((P) => {
    Plotly = P;
    const shown = shell.timeline.log.current; // a step drawn before the charts could be
    if (shown && run) walk.show(Plotly, run, shown.head, shown.query);
  });

  /** One button per prompt token, a bar over it; hovering or focusing it moves the timeline to its row. */
  function buildTokens(ev) {
    headPick.replaceChildren(...Array.from({ length: ev.n_heads }, (_, h) =>
      el("option", { value: String(h), text: `head ${h} (key/value head ${Math.floor(h / (ev.n_heads / ev.n_kv_heads))})` })));
    headPick.value = String(ev.head);
    headPick.disabled = !ev.all_heads;
    buttons = ev.tokens.map((t, i) => {
      const bar = el("span", { class: "ilab-attn__bar" });
      const b = el("button", { type: "button", class: "ilab-attn__tok", tabindex: i ? "-1" : "0", "aria-pressed": "false",
        "data-index": String(i), "aria-label": tokenLabel(t, i) },
      el("span", { class: "ilab-attn__well" }, bar), el("span", { class: "ilab-attn__text", text: String(t).replace(/\n/g, "⏎") }));
      b.bar = bar;
      const pick = () => shell.timeline.seek(i);
      b.addEventListener("mouseenter", pick);
      b.addEventListener("focus", pick);
      b.addEventListener("click", pick);
      return b;
    });
    tokens.replaceChildren(...buttons);
    rowView.hidden = false;
  }

  tokens.addEventListener("keydown", (e) => {
    const i = Number(e.target.dataset && e.target.dataset.index);
    if (!Number.isInteger(i) || !buttons.length) return;
    const to = { ArrowRight: i + 1, ArrowDown: i + 1, ArrowLeft: i - 1, ArrowUp: i - 1, Home: 0, End: buttons.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    buttons[Math.max(0, Math.min(buttons.length - 1, to))].focus();
  });

  headPick.addEventListener("change", () => {
    if (!run) return;
    const h = Number(headPick.value);
    head.input.value = String(h); // the next run asks for the head on show
    const at = Math.max(0, shell.timeline.log.index);
    shell.timeline.reset();
    for (const step of attentionSteps(run, h)) shell.timeline.push(step);
    shell.timeline.seek(at);
    show(run, h);
  });

  /** Step i: row i's weights as bars over the tokens it may see (later ones hatched: masked), token i outlined,
   * its heatmap row boxed. */
  function drawRow(step) {
    buttons.forEach((b, j) => {
      const w = j <= step.query ? step.row[j] : 0;
      b.bar.style.height = `${Math.round(w * 100)}%`;
      b.dataset.weight = j <= step.query ? w.toFixed(4) : "";
      b.dataset.masked = String(j > step.query);
      b.title = j <= step.query ? `weight ${fixed(w, 3)}` : "masked: a later token";
      b.setAttribute("aria-pressed", String(j === step.query));
      b.tabIndex = j === step.query ? 0 : -1;
    });
    if (Plotly && heat.chart.data) {
      Plotly.relayout(heat.chart, { shapes: [{ type: "rect", xref: "paper", x0: 0, x1: 1, yref: "y", y0: step.query - 0.5, y1: step.query + 0.5,
        line: { color: "#d62728", width: 2 } }] });
    }
    walk.show(Plotly, run, step.head, step.query);
  }

  function show(ev, h) {
    const weights = headRows(ev, h);
    const labels = ev.tokens.map(tokenLabel);
    const n = labels.length;
    // Masked cells (key after query) are null: Plotly leaves them empty, over the grey plot background.
    const z = weights.map((row, i) => row.map((w, j) => (j > i ? null : w)));
    const rows = table.querySelector("tbody");
    rows.replaceChildren(...weights.map((row, i) => {
      const [a, b] = topKeys(row.slice(0, i + 1));
      const cell = (x) => (x ? `${labels[x.j]} (${fixed(x.w, 2)})` : "–");
      return el("tr", {}, el("th", { scope: "row", text: labels[i] }), el("td", { text: cell(a) }), el("td", { text: cell(b) }));
    }));
    const onFirst = weights.slice(1).filter((row) => row[0] >= 0.5).length;
    const onPrev = weights.slice(1).filter((row, i) => topKeys(row.slice(0, i + 2), 1)[0].j === i).length;
    const kvHead = Math.floor(h / (ev.n_heads / ev.n_kv_heads));
    heat.summary.textContent = `Layer ${ev.layer}, head ${h} (it shares key/value head ${kvHead} with ` +
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
      title: { text: `Who attends to whom<br><sub>layer ${ev.layer}, head ${h} · grey: masked</sub>` },
      height: Math.max(320, Math.min(640, 180 + 16 * n)),
      plot_bgcolor: MASKED,
      xaxis: { title: { text: "key token (attended to)" }, tickangle: -60, tickfont: { size: tick }, automargin: true, type: "category" },
      yaxis: { title: { text: "query token" }, autorange: "reversed", tickfont: { size: tick }, automargin: true, type: "category" },
    }, PLOT_CONFIG);
    if (!heat.chart.dataset.hoverRows) { // hovering a heatmap row shows that token's row too
      heat.chart.dataset.hoverRows = "true";
      heat.chart.on("plotly_hover", (d) => {
        const p = d.points && d.points[0];
        if (p && Array.isArray(p.pointIndex)) shell.timeline.seek(p.pointIndex[0]);
      });
    }
  }
  return shell;
}
