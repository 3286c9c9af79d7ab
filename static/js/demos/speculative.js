// Speculative decoding, round by round: a step timeline (one step per round, speculative-steps.js) shows the text
// so far with that round's guesses marked accepted (green, underlined), rejected (red, struck through, followed by
// the target's replacement), discarded after a rejection (grey) or topped up with a bonus token, and the round's
// p/q table. Charts: acceptance per draft position, target passes per token as the run goes, and plain vs
// speculative time as the alternating repeats measured it (medians with their spread, comparison.js: the speedup is
// theirs, never one streamed run's). Every number comes from the run's trace.
// Notation: p = the draft's distribution, q = the target's (docs/trace-schema/speculative.md).
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, checkField, el, fmtMs, numberField, outputs, selectField } from "../calculators/ui.js";
import { demoShell, intIn, numIn, promptField } from "./course-demo-kit.js";
import { showWhy, speculativeNote, whyNote } from "./run-notes.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";
import { clearComparison, comparisonBlock, drawComparison } from "./comparison.js";
import { speculativeSteps } from "./speculative-steps.js";

const STYLE_ID = "ilab-spec-style";
const CSS = `
.ilab-spec__legend { display: flex; flex-wrap: wrap; gap: .8rem; font-size: .85rem; margin: .4rem 0; padding: 0; list-style: none; }
.ilab-spec__text .p { color: #666; }
.ilab-spec__text .tok { border-radius: 2px; }
.ilab-spec__legend .tok { border-radius: 2px; padding: 0 .2rem; }
.ilab-spec__text .acc, .ilab-spec__legend .acc { background: #bbf7d0; text-decoration: underline; text-decoration-color: #15803d; }
.ilab-spec__text .rej, .ilab-spec__legend .rej { background: #fecaca; color: #7f1d1d; text-decoration: line-through; }
.ilab-spec__text .skip, .ilab-spec__legend .skip { background: #e5e7eb; color: #4b5563; text-decoration: line-through; }
.ilab-spec__text .done { border-bottom: 1px solid #d1d5db; }
.ilab-spec__text .res, .ilab-spec__legend .res { background: #fde68a; font-weight: 600; }
.ilab-spec__text .bonus, .ilab-spec__legend .bonus { background: #bfdbfe; font-weight: 600; }
.ilab-spec__text .bonus::after, .ilab-spec__legend .bonus::after { content: "+"; font-size: .7em; vertical-align: super; color: #1d4ed8; }
.ilab-spec__text .res::after, .ilab-spec__legend .res::after { content: "↺"; font-size: .7em; vertical-align: super; color: #92400e; }
.ilab-spec__round caption { text-align: left; font-weight: 600; padding: .3rem 0; }
`;

const OUTCOME_LABEL = { accepted: "accepted", rejected: "rejected", not_reached: "not reached" };

function injectOwnStyle() {
  if (document.getElementById(STYLE_ID)) return;
  const style = document.createElement("style");
  style.id = STYLE_ID;
  style.textContent = CSS;
  document.head.appendChild(style);
}

const show = (s) => JSON.stringify(s).slice(1, -1); // make spaces and newlines in tokens visible in tables
const fmt = (x, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : "–");

export function mount(root, config = {}) {
  injectOwnStyle();
  // Defaults and limits come from the catalog's spec (demos/catalog/speculative.py), embedded in the page.
  const sp = specParams(config);
  const presets = (config.spec && config.spec.presets) || [];

  const prompt = promptField("Prompt", sp.value("prompt"));
  const preset = selectField("Preset", [["", "Custom prompt"], ...presets.map((x, i) => [String(i), x.label])], "");
  const chat = checkField("Use the chat template", sp.value("chat"));
  const draft = selectField("Draft", sp.choices("draft", { ngram: "n-gram lookup in the context",
    "self-early-exit": "self: first L layers + shared head", "self-int8": "self: int8 copy of the model" }), sp.value("draft"));
  const exitLayers = numberField(`Early-exit layers L (of ${sp.max("exit_layers") + 1})`, sp.value("exit_layers"),
    sp.range("exit_layers", { step: 1 }));
  const k = numberField("Tokens drafted per round (k)", sp.value("k"), sp.range("k", { step: 1 }));
  const temperature = numberField("Temperature", sp.value("temperature"), sp.range("temperature", { step: 0.1, help: "0 = greedy" }));
  const newTokens = numberField("New tokens", sp.value("max_new_tokens"), sp.range("max_new_tokens", { step: 1 }));
  const baseline = checkField("Time plain decoding too (for the speedup)", sp.value("baseline"));
  const syncExit = () => { exitLayers.input.disabled = draft.input.value !== "self-early-exit"; };
  draft.input.addEventListener("change", syncExit);
  syncExit();
  preset.input.addEventListener("change", () => {
    const x = presets[Number(preset.input.value)];
    if (preset.input.value === "" || !x) return;
    prompt.input.value = x.prompt;
    if (x.draft) { draft.input.value = x.draft; syncExit(); }
  });
  prompt.input.addEventListener("input", () => { preset.input.value = ""; });

  const legend = el("ul", { class: "ilab-spec__legend", "aria-label": "How tokens are marked" },
    el("li", {}, el("span", { class: "tok acc", text: "accepted" }), " target agreed"),
    el("li", {}, el("span", { class: "tok rej", text: "rejected" }), " target disagreed"),
    el("li", {}, el("span", { class: "tok skip", text: "discarded" }), " guessed after a rejection"),
    el("li", {}, el("span", { class: "tok res", text: "fix" }), " target's replacement (residual)"),
    el("li", {}, el("span", { class: "tok bonus", text: "bonus" }), " extra token when all k were accepted"));
  const text = el("div", { class: "ilab-calc__text ilab-spec__text", role: "group", "aria-label": "The text so far, with this round's guesses marked" });
  const out = outputs([["rounds", "Rounds (target passes)"], ["accept", "Guesses accepted"], ["perPass", "Tokens per target pass"],
    ["passPerTok", "Target passes per token"], ["draftCost", "Draft cost / verify pass"], ["plain", "Plain decoding, per token"],
    ["spec", "Speculative, per token"], ["speedup", "Speedup (medians of the repeats)"], ["same", "Same tokens as plain?"]],
  "Measured on this run");
  const roundTable = el("table", { class: "ilab-spec__round" });
  const why = whyNote();
  const posChart = chartBlock("Bar chart: fraction of guesses accepted at each draft position 1 to k");
  const speedChart = chartBlock("Line chart: target passes per token, by tokens generated");
  const timeChart = chartBlock("Bar chart: time to generate the answer, plain and speculative, median of the alternating repeats with their spread");
  let Plotly = null;
  let s = null;

  const cmp = comparisonBlock(); // the two settings timed in alternating repeats, counters beside
  const shell = demoShell(root, config, {
    title: "Speculative decoding",
    fields: [preset.label, draft.label, k.label, temperature.label, newTokens.label, exitLayers.label, chat.label, baseline.label, prompt.label],
    getParams() {
      if (!prompt.input.value.trim()) throw new Error("Enter a prompt first.");
      const temp = numIn(temperature.input, "Temperature", sp.min("temperature"), sp.max("temperature"));
      return { prompt: prompt.input.value, chat: chat.input.checked, draft: draft.input.value,
        exit_layers: intIn(exitLayers.input, "Early-exit layers", sp.min("exit_layers"), sp.max("exit_layers")),
        k: intIn(k.input, "k", sp.min("k"), sp.max("k")),
        temperature: temp, max_new_tokens: intIn(newTokens.input, "New tokens", sp.min("max_new_tokens"), sp.max("max_new_tokens")),
        seed: temp > 0 ? 0 : null, baseline: baseline.input.checked };
    },
    onStart(params) {
      cmp.reset();
      fillForm({ prompt: prompt.input, chat: chat.input, draft: draft.input, exit_layers: exitLayers.input, k: k.input,
        temperature: temperature.input, max_new_tokens: newTokens.input, baseline: baseline.input }, params);
      syncExit();
      s = { k: params.k, drafted: [], accepted: [], x: [], passes: [], rounds: 0, acc: 0, nDrafted: 0,
        baseline: params.baseline, baselineIds: null, out: [], metrics: null, comparison: null };
      clearComparison(Plotly, timeChart, params.baseline ? undefined : "Plain decoding is not timed in this run.");
      text.replaceChildren();
      roundTable.replaceChildren();
      for (const key of ["rounds", "accept", "perPass", "passPerTok", "draftCost", "plain", "spec", "speedup", "same"]) out.set(key, "–");
      posChart.summary.textContent = "";
      speedChart.summary.textContent = "";
      showWhy(why, "");
      drawCharts();
    },
    onEvent(ev) {
      cmp.onEvent(ev);
      if (ev.type === "comparison") {
        onComparison(ev);
      } else if (ev.type === "spec_baseline") {
        s.baselineIds = ev.token_ids; // its time is one sample: the repeats after the run give the times
      } else if (ev.type === "spec_started") {
        s.k = ev.k;
        s.drafted = new Array(ev.k).fill(0);
        s.accepted = new Array(ev.k).fill(0);
      } else if (ev.type === "spec_round") {
        onRound(ev);
      } else if (ev.type === "spec_finished") {
        onFinished(ev);
      }
    },
    steps: { fromEvent: speculativeSteps(), draw: drawRound, picture: () => [legend, text, roundTable] },
  });
  shell.body.append(legend, text, roundTable, out.node, why, // the round's text and its table: one picture
    el("div", { class: "ilab-calc__charts" }, posChart.figure, speedChart.figure, timeChart.figure));
  shell.body.append(cmp.node);
  shell.plotly.then((P) => {
    Plotly = P;
    drawCharts();
    if (s && s.comparison) drawComparison(Plotly, timeChart, s.comparison);
  });

  function onRound(ev) {
    for (let i = 0; i < ev.drafted.length; i += 1) {
      s.drafted[i] += 1;
      if (ev.outcome[i] === "accepted") s.accepted[i] += 1;
    }
    s.rounds += 1;
    s.acc += ev.n_accepted;
    s.nDrafted += ev.drafted.length;
    s.x.push(ev.n_generated);
    s.passes.push(s.rounds / ev.n_generated);
    out.set("rounds", String(s.rounds));
    out.set("accept", `${s.acc} / ${s.nDrafted}`);
    out.set("perPass", fmt(ev.n_generated / s.rounds));
    out.set("passPerTok", fmt(s.rounds / ev.n_generated));
    drawCharts();
  }

  /** The timeline's picture of one round: the text before it, its guesses marked, the correction or bonus token,
   * and its p/q table. A 64-round run redraws well under a frame (a few dozen spans). */
  function drawRound(step) {
    const ev = step.ev;
    const spans = [el("span", { class: "p", text: step.prompt })];
    for (let i = 0; i < step.upto; i += 1) {
      const x = step.before[i];
      spans.push(el("span", { class: "tok done", text: x.text, title: `round ${x.round + 1}` }));
    }
    step.guesses.forEach((g, i) => {
      const cls = { accepted: "acc", rejected: "rej", not_reached: "skip" }[g.outcome];
      spans.push(el("span", { class: `tok ${cls}`, "data-outcome": g.outcome, text: g.text,
        title: `guess ${i + 1}: p(draft) = ${fmt(ev.p_draft[i], 3)}, q(target) = ${fmt(ev.q_target[i], 3)}, ` +
          `accept with min(1, q/p) = ${fmt(ev.accept_prob[i], 3)} → ${OUTCOME_LABEL[g.outcome]}` }));
    });
    if (step.next) {
      spans.push(el("span", { class: `tok ${step.next.kind === "bonus" ? "bonus" : "res"}`, "data-outcome": step.next.kind,
        text: step.next.text, title: step.next.kind === "bonus" ? "bonus token sampled from the target's last distribution"
          : "the target's replacement, sampled from norm(max(0, q − p))" }));
    }
    text.replaceChildren(...spans);
    showRound(ev);
  }

  function showRound(ev) {
    const greedy = ev.uniform.every((u) => u === null);
    roundTable.replaceChildren(
      el("caption", { text: `Round ${ev.round + 1}: p = draft, q = target${greedy ? " (greedy: both one-hot)" : ""}` }),
      el("thead", {}, el("tr", {}, ...["position", "guess", "p(guess)", "q(guess)", "min(1, q/p)", "r ~ U(0,1)", "outcome"]
        .map((h) => el("th", { scope: "col", text: h })))),
      el("tbody", {}, ...ev.drafted.map((_, i) => el("tr", {},
        el("td", { text: String(ev.position + i) }), el("td", { text: show(ev.drafted_text[i]) }),
        el("td", { text: fmt(ev.p_draft[i], 3) }), el("td", { text: fmt(ev.q_target[i], 3) }),
        el("td", { text: fmt(ev.accept_prob[i], 3) }), el("td", { text: ev.uniform[i] === null ? "–" : fmt(ev.uniform[i], 3) }),
        el("td", { text: OUTCOME_LABEL[ev.outcome[i]] }))),
      el("tr", {}, el("td", { text: String(ev.position + ev.n_accepted) }), el("td", { text: show(ev.next_text) }),
        el("td", { colspan: "5", text: ev.next_kind === "bonus" ? "bonus: sampled from q at the last position"
          : "replacement: sampled from norm(max(0, q − p))" }))));
  }

  function onFinished(ev) {
    const m = ev.metrics || {};
    // Tokens per target pass and passes per token stay as the rounds counted them (onRound), the numbers the passes
    // chart draws: every round is one target pass, the first (the prompt's prefill) included. The engine's own
    // figures leave the prefill out (1 + accepted / rounds, verify passes / token), so beside the chart they disagreed.
    const perPass = m.n_generated / Math.max(m.rounds, 1);
    out.set("draftCost", m.draft_forwards ? `${fmt(m.draft_ms_per_forward, 1)} ms / ${fmt(m.verify_ms_per_forward, 1)} ms`
      : `free / ${fmt(m.verify_ms_per_forward, 1)} ms`);
    if (!s.baseline) out.set("spec", fmtMs(m.total_time_s / Math.max(m.n_generated, 1))); // else: the repeats' median
    if (s.baselineIds) {
      const same = s.baselineIds.length === ev.token_ids.length && s.baselineIds.every((t, i) => t === ev.token_ids[i]);
      out.set("same", same ? "yes, token for token" : "no (sampling: same distribution, different draws)");
    }
    const byPos = m.acceptance_by_position.map((a, i) => `${i + 1}: ${a === null ? "–" : `${Math.round(a * 100)}%`}`).join(", ");
    posChart.summary.textContent = `Acceptance by draft position — ${byPos}. Overall ${m.accepted} of ${m.drafted} guesses ` +
      `(${Math.round(m.acceptance_rate * 100)}%); ${fmt(perPass)} tokens per target pass.`;
    speedChart.summary.textContent = `${m.n_generated} tokens in ${m.rounds} target passes, ` +
      `${fmt(m.rounds / Math.max(m.n_generated, 1))} per token (plain decoding: 1 per token).`;
    s.metrics = m;
    drawCharts();
  }

  // Plain and speculative timed in alternating repeats after the run: the speed figures are their medians.
  function onComparison(ev) {
    s.comparison = ev;
    const plain = ev.sides.find((x) => x.label === "plain decoding");
    const spec = ev.sides.find((x) => x.label === "speculative");
    const perToken = (side) => side.median_s / Math.max((side.counters || {}).tokens || 0, 1);
    out.set("plain", fmtMs(perToken(plain)));
    out.set("spec", fmtMs(perToken(spec)));
    out.set("speedup", `${fmt(plain.median_s / spec.median_s)}×${ev.within_noise ? " (within noise)" : ""}`);
    drawComparison(Plotly, timeChart, ev);
    showWhy(why, speculativeNote(s.metrics, ev));
  }

  function drawCharts() {
    if (!Plotly || !s) return;
    const n = s.drafted.length;
    const xs = Array.from({ length: n }, (_, i) => i + 1);
    const rates = s.drafted.map((d, i) => (d ? s.accepted[i] / d : 0));
    Plotly.react(posChart.chart, [{ type: "bar", x: xs, y: rates, marker: { color: "#16a34a" },
      customdata: s.drafted, hovertemplate: "position %{x}: %{y:.0%} of %{customdata} guesses<extra></extra>" }],
    { ...BASE_LAYOUT, title: { text: "Acceptance by draft position" }, xaxis: { title: { text: "guess number in the round" }, dtick: 1 },
      yaxis: { title: { text: "accepted" }, range: [0, 1], tickformat: ".0%" } }, PLOT_CONFIG);
    // copies: Plotly.react compares data arrays by reference, so mutated arrays would not redraw
    const traces = [{ type: "scatter", mode: "lines+markers", name: "target passes per token", x: [...s.x], y: [...s.passes],
      line: { color: "#6b7280" } }];
    Plotly.react(speedChart.chart, traces, { ...BASE_LAYOUT, title: { text: "Target passes per token<br><sub>dotted: plain decoding's 1</sub>" },
      xaxis: { title: { text: "tokens generated" } }, yaxis: { title: { text: "passes per token" }, rangemode: "tozero" },
      showlegend: false,
      shapes: [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: 1, y1: 1, line: { dash: "dot", color: "#9ca3af" } }] }, PLOT_CONFIG);
  }
  return shell;
}
