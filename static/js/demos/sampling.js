// Choosing the next token on the real model: the student's prompt and sampler settings, and at each step of the
// run a horizontal bar chart of the 20 most likely next tokens (probability at temperature 1, then after
// temperature, coloured by whether top-k / top-p / min-p kept it), a diamond on each kept token for the probability
// the draw gave it after renormalizing, and a star on the token drawn. The step timeline redraws it; its caption
// comes from the same step (sampling-steps.js). Every number comes from the run's `sampling_step` events.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, el, numberField } from "../calculators/ui.js";
import { demoShell, intIn, numIn, promptField } from "./course-demo-kit.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";
import { samplingSteps } from "./sampling-steps.js";

const BEFORE = "#9ca3af"; // grey: the model's own distribution (temperature 1)
const KEPT = "#1f77b4"; // blue: after temperature, kept by the cut
const CUT = "#f4a261"; // orange: after temperature, cut
const DRAWN = "#d62728";
const VOCAB = 49152; // SmolLM2's vocabulary: the caption says how many of them the cut keeps

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/sampling.py), embedded in the page.
  const sp = specParams(config);
  const prompt = promptField("Prompt", sp.value("prompt"));
  const field = (key, text, step, help) => numberField(text, sp.value(key) ?? "", sp.range(key, { step, help }));
  const newTokens = field("max_new_tokens", "New tokens", 1);
  const temperature = field("temperature", "Temperature (0 = greedy)", 0.05);
  const topK = field("top_k", "Top-k (0 = off)", 1);
  const topP = field("top_p", "Top-p (1 = off)", 0.01);
  const minP = field("min_p", "Min-p (0 = off)", 0.01);
  const penalty = field("repetition_penalty", "Repetition penalty (1 = off)", 0.05);
  const seed = field("seed", "Seed (empty = a fresh draw each run)", 1);
  const text = el("div", { class: "ilab-calc__text", role: "log", "aria-live": "polite", "aria-label": "Generated text" });
  const bars = chartBlock("Horizontal bar chart: the 20 most likely next tokens at the timeline's step, each with its " +
    "probability before temperature (grey) and after it (blue when the sampler keeps the token, orange when it is cut); " +
    "a diamond marks the probability the draw gave each kept token, a star the token drawn");
  let Plotly = null;

  function layout(step) {
    const context = step ? step.context.slice(-40) : "";
    const title = step ? `Next token after “${context.length < step.context.length ? "…" : ""}${context.trim()}”` : "Next-token probabilities";
    return { ...BASE_LAYOUT, title: { text: title, font: { size: 13 } }, barmode: "group", bargap: 0.25, height: 560,
      margin: { l: 120, r: 15, t: 56, b: 90 }, legend: { orientation: "h", y: -0.12 },
      xaxis: { title: { text: "probability" }, tickformat: ".0%", rangemode: "tozero", automargin: true },
      yaxis: { autorange: "reversed", automargin: true, tickfont: { family: "monospace", size: 11 } } };
  }

  /** The chart at one step (timeline.js calls it at most once a frame). */
  function draw(step) {
    bars.chart.dataset.step = String(step.index);
    bars.summary.textContent = step.caption;
    if (!Plotly) return;
    const y = step.bars.map((b) => b.label);
    const pick = (keep, value) => step.bars.map((b) => (keep(b) ? value(b) : null));
    const hover = (what) => `%{y}: %{x:.2%} ${what}<extra></extra>`;
    const traces = [
      { type: "bar", orientation: "h", name: "before temperature", y, x: step.bars.map((b) => b.before),
        marker: { color: BEFORE }, offsetgroup: "before", hovertemplate: hover("at temperature 1") },
      { type: "bar", orientation: "h", name: "after temperature, kept", y, x: pick((b) => b.kept, (b) => b.after),
        marker: { color: KEPT }, offsetgroup: "after", hovertemplate: hover("after temperature, kept") },
      { type: "bar", orientation: "h", name: "after temperature, cut", y, x: pick((b) => !b.kept, (b) => b.after),
        marker: { color: CUT }, offsetgroup: "after", hovertemplate: hover("after temperature, cut") },
      { type: "scatter", mode: "markers", name: "what the draw used", y, x: pick((b) => b.kept, (b) => b.drawn),
        marker: { symbol: "diamond", size: 9, color: "#111827" }, hovertemplate: hover("in the draw (renormalized)") },
    ];
    const chosen = step.bars[step.rank];
    if (chosen) {
      traces.push({ type: "scatter", mode: "markers", name: "drawn", y: [chosen.label], x: [Math.max(chosen.drawn, chosen.after)],
        marker: { symbol: "star", size: 16, color: DRAWN, line: { color: "#000", width: 1 } }, hoverinfo: "skip" });
    }
    Plotly.react(bars.chart, traces, { ...layout(step), datarevision: step.index });
  }

  let fromEvent = samplingSteps({ vocab: VOCAB });
  const shell = demoShell(root, config, {
    title: "Choosing the next token",
    steps: { fromEvent: (ev) => fromEvent(ev), draw, picture: bars.figure },
    fields: [prompt.label, newTokens.label, temperature.label, topK.label, topP.label, minP.label, penalty.label, seed.label],
    getParams() {
      if (!prompt.input.value.trim()) throw new Error("Enter a prompt first.");
      const num = (input, key, name) => numIn(input, name, sp.min(key), sp.max(key));
      const seedValue = seed.input.value.trim() === "" ? null : intIn(seed.input, "Seed", sp.min("seed"), sp.max("seed"));
      return {
        prompt: prompt.input.value,
        max_new_tokens: intIn(newTokens.input, "New tokens", sp.min("max_new_tokens"), sp.max("max_new_tokens")),
        temperature: num(temperature.input, "temperature", "Temperature"),
        top_k: intIn(topK.input, "Top-k", sp.min("top_k"), sp.max("top_k")),
        top_p: num(topP.input, "top_p", "Top-p"),
        min_p: num(minP.input, "min_p", "Min-p"),
        repetition_penalty: num(penalty.input, "repetition_penalty", "Repetition penalty"),
        seed: seedValue,
      };
    },
    onStart(params) {
      fillForm({ prompt: prompt.input, max_new_tokens: newTokens.input, temperature: temperature.input, top_k: topK.input,
        top_p: topP.input, min_p: minP.input, repetition_penalty: penalty.input, seed: seed.input }, params);
      fromEvent = samplingSteps({ vocab: VOCAB });
      text.replaceChildren();
      bars.summary.textContent = "";
      if (Plotly) Plotly.react(bars.chart, [], layout(null));
    },
    onEvent(ev) {
      if (ev.type === "run_started") {
        text.append(el("span", { style: "color:#4b5563", text: ev.prompt_tokens.join("") }));
      } else if (ev.type === "token") {
        text.append(el("span", { class: "ilab-sampling__token", title: `token ${ev.step + 1}`, text: ev.text }));
      }
    },
  });
  shell.body.append(text, el("div", { class: "ilab-calc__charts" }, bars.figure));
  shell.plotly.then((P) => {
    Plotly = P;
    if (!Plotly) return;
    Plotly.newPlot(bars.chart, [], layout(null), PLOT_CONFIG);
    const tl = shell.timeline; // a run that arrived before Plotly: draw the step the timeline shows
    if (tl && tl.log.current) draw(tl.log.current);
  });
  return shell;
}
