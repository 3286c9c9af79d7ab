// The primer's attention walk-through for the query token the timeline shows, from the real model's numbers (the
// `attention_weights` event's `walk`, vectors cut to their first dimensions: one head of one layer at the student's
// prompt): its query Q, the keys K and values V of the tokens it may see, the scores q·k/√d (over every dimension),
// their softmax, and the output Σ weight × v. Five numbered
// sentences quote the numbers; two charts draw them: the scores beside their softmax, and the value rows weighted
// into the output. Drawn once per step (a few dozen cells), so it follows the scrubber.
//   const walk = attentionWalk(); parent.append(walk.node); walk.show(Plotly, run, head, query)
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, el, fixed } from "../calculators/ui.js";

const SHOWN_DIMS = 4; // numbers of a 64-number vector quoted in the text

const vec = (xs) => `[${xs.slice(0, SHOWN_DIMS).map((x) => fixed(x, 2)).join(", ")}, …]`;
const name = (t) => `'${String(t).trim() || (String(t).includes("\n") ? "⏎" : "␣")}'`;

/** The five sentences for query `i`: what each stage computed, with the run's numbers. */
export function walkSentences(run, i) {
  const w = run.walk;
  const seen = run.tokens.slice(0, i + 1);
  const weights = run.weights[i].slice(0, i + 1);
  const order = weights.map((x, j) => j).sort((a, b) => weights[b] - weights[a]).slice(0, 3);
  const list = (vals, digits) => order.map((j) => `${name(seen[j])} ${fixed(vals[j], digits)}`).join(", ");
  const d = run.head_dim;
  const more = i + 1 > order.length ? ` and ${i + 1 - order.length} more` : ""; // the largest three are quoted
  return [
    `Q: the query of ${name(run.tokens[i])} (token ${i}) is ${d} numbers, ${vec(w.q[i])}: what it is looking for.`,
    `K: each of the ${i + 1} tokens it may see (itself and the ones before) has a key of ${d} numbers; ` +
      `the key of ${name(seen[order[0]])} is ${vec(w.k[order[0]])}.`,
    `Scores: q · k / √${d} for each of them: ${list(w.scores[i], 2)}${more}.`,
    `Softmax: e^score divided by the sum of e^score over the ${i + 1} tokens turns the scores into weights that sum to 1: ` +
      `${list(weights, 2)}${more}.`,
    `Weighted sum: the head's output for ${name(run.tokens[i])} is Σ weight × V (each token's value, ${d} numbers) = ` +
      `${vec(w.output[i])}: mostly the value of ${name(seen[order[0]])}.`,
  ];
}

export function attentionWalk() {
  const steps = el("ol", { class: "ilab-attn__walk" });
  const scores = chartBlock("Bar charts: the scores q·k/√d of the shown token against each token it may see, and their softmax, the attention weights");
  const values = chartBlock("Heatmap: the value vectors of the tokens it may see, each labelled with its weight, and the output, their weighted sum");
  const note = el("p", { class: "ilab-calc__summary" });
  const node = el("section", { class: "ilab-attn__walkthrough", hidden: true, "aria-label": "How one token's output is made" },
    el("h4", { text: "Step by step: Q, K, V → scores → softmax → weighted sum" }), note, steps,
    el("div", { class: "ilab-calc__charts" }, scores.figure, values.figure));

  function show(Plotly, run, head, i) {
    node.hidden = !run || !run.walk;
    if (node.hidden) return;
    if (head !== run.head) { // the walk travels for the run's own head only
      note.textContent = `The walk-through is for head ${run.head}, the head this run was asked for: show it again, ` +
        `or run with head ${head}.`;
      steps.replaceChildren();
      scores.figure.hidden = values.figure.hidden = true;
      return;
    }
    scores.figure.hidden = values.figure.hidden = false;
    note.textContent = `Layer ${run.layer}, head ${head}, token ${i} ${name(run.tokens[i])}: the numbers below are the model's own.`;
    steps.replaceChildren(...walkSentences(run, i).map((text) => el("li", { text })));
    if (!Plotly) return;
    const w = run.walk;
    const labels = run.tokens.slice(0, i + 1).map((t, j) => `${j}: ${String(t).replace(/\n/g, "⏎")}`);
    const weights = run.weights[i].slice(0, i + 1);
    Plotly.react(scores.chart, [
      { type: "bar", name: "score q·k/√d", x: labels, y: w.scores[i], marker: { color: "#6b7280" },
        hovertemplate: "%{x}: score %{y:.3f}<extra></extra>" },
      { type: "bar", name: "softmax weight", x: labels, y: weights, xaxis: "x2", yaxis: "y2", marker: { color: "#2171b5" },
        hovertemplate: "%{x}: weight %{y:.3f}<extra></extra>" },
    ], { ...BASE_LAYOUT, title: { text: `Scores, then softmax, for token ${i}` }, showlegend: false,
      grid: { rows: 2, columns: 1, pattern: "independent" }, height: 360,
      xaxis: { type: "category", showticklabels: false }, yaxis: { title: { text: "score" } },
      xaxis2: { type: "category", tickangle: -45, automargin: true }, yaxis2: { title: { text: "weight" }, range: [0, 1] } }, PLOT_CONFIG);
    const rows = [...w.v.slice(0, i + 1), w.output[i]];
    const names = [...labels.map((l, j) => `${fixed(weights[j], 2)} × v(${l})`), "output = Σ weight × v"];
    Plotly.react(values.chart, [{ type: "heatmap", z: rows, y: names, colorscale: "RdBu", zmid: 0, showscale: false, ygap: 1,
      hovertemplate: "%{y}, dimension %{x}: %{z:.3f}<extra></extra>" }],
    { ...BASE_LAYOUT, title: { text: "Values weighted into the output" }, height: Math.max(220, 120 + 18 * rows.length),
      xaxis: { title: { text: `first ${w.output[i].length} of ${run.head_dim} dims` }, automargin: true }, yaxis: { autorange: "reversed", type: "category", automargin: true } },
    PLOT_CONFIG);
    values.summary.textContent = `Rows: the values of tokens 0 to ${i}, each labelled with its weight; last row: the output, ` +
      `their weighted sum (${vec(w.output[i])}).`;
  }
  return { node, show };
}
