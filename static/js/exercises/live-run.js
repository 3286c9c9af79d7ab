// "Use my sampler / draft in a live run" (templates/exercises/_live_run.html): once the exercise's tests all pass,
// the passing submission drives a run of the `student-sampler` or `student-draft` demo (exercises/live_run.py,
// live_draft.py) on the shared demo socket; each `student_choice` (a token) or `student_draft` (a proposal) event
// becomes a row, the student's choice beside the engine's own.
import { getSocket, queueText } from "../ws-client.js";

const HIDDEN = new Set(["submission", "chat", "seed"]); // the page's own choice: not a field of the form
const WAITING = "Pass every test first: then your code can drive a run.";

function field(name, param, inputId) {
  const wrap = document.createElement("div");
  wrap.className = "exercise-live-field";
  const label = document.createElement("label");
  label.htmlFor = inputId;
  label.textContent = param.label || name;
  const input = document.createElement("input");
  input.id = inputId;
  input.name = name;
  if (param.kind === "str") {
    input.type = "text";
    if (param.max_tokens) input.maxLength = 2000;
  } else {
    input.type = "number";
    if (param.min !== undefined) input.min = String(param.min);
    if (param.max !== undefined) input.max = String(param.max);
    input.step = param.kind === "int" ? "1" : "0.05";
  }
  input.value = param.default ?? "";
  wrap.append(label, input);
  return { wrap, input };
}

function valueOf(param, input) {
  if (param.kind === "str") return input.value;
  const number = Number(input.value);
  return param.kind === "int" ? Math.round(number) : number;
}

const quoted = (texts) => (texts.length ? texts.map((t) => JSON.stringify(t)).join(" ") : "none");

/** One table row: the row's number, then its cells; the third cell says whether both choices agree. */
function row(body, number, cells, same) {
  const tr = document.createElement("tr");
  const head = document.createElement("th");
  head.scope = "row";
  head.textContent = String(number);
  tr.append(head);
  cells.forEach((text, i) => {
    const td = document.createElement("td");
    td.textContent = text;
    if (i === 2) td.className = same ? "result-pass" : "result-differs";
    tr.append(td);
  });
  body.append(tr);
}

function choiceRow(body, c) {
  row(body, c.step + 1, [JSON.stringify(c.text), JSON.stringify(c.builtin_text), c.same ? "yes" : "no",
    c.u.toFixed(3), String(c.rank + 1), `${(c.probability * 100).toFixed(1)}%`], c.same);
}

function draftRow(body, p, round) {
  // The round just before a proposal's event verified it (exercises/live_draft.py): its kept guesses are these.
  const verified = round && p.tokens.length && round.drafted.join() === p.tokens.slice(0, round.drafted.length).join();
  row(body, p.proposal + 1, [quoted(p.texts), quoted(p.builtin_texts), p.same ? "yes" : "no", String(p.context_len),
    verified ? `${round.n_accepted} of ${round.drafted.length}` : (p.tokens.length ? "—" : "no guess")], p.same);
}

function summaryText(rows, kind) {
  const same = rows.filter((r) => r.same).length;
  if (kind === "student_draft") {
    return `Your draft made ${rows.length} proposals; the built-in draft would have guessed the same ${same} of ` +
      `${rows.length} times.`;
  }
  return `Your sampler chose ${rows.length} tokens; the engine's own sampler picked the same token ${same} of ` +
    `${rows.length} times.`;
}

export function setUpLive(exercise) {
  const box = exercise.querySelector(".exercise-live");
  if (!box) return;
  const spec = JSON.parse(box.querySelector('script[type="application/json"]').textContent);
  const form = box.querySelector(".exercise-live-form");
  const button = box.querySelector(".exercise-live-run");
  const status = box.querySelector(".exercise-live-status");
  const result = box.querySelector(".exercise-live-result");
  const summary = box.querySelector(".exercise-live-summary");
  const text = box.querySelector(".exercise-live-text");
  const body = box.querySelector(".exercise-live-table tbody");
  const inputs = {};
  const FIELDS = Object.keys(spec.params).filter((name) => !HIDDEN.has(name));
  for (const name of FIELDS) {
    const made = field(name, spec.params[name], `${box.id}-${name}`);
    inputs[name] = made.input;
    box.querySelector(".exercise-live-fields").append(made.wrap);
  }
  const stop = box.querySelector(".exercise-live-stop");
  let submission = box.dataset.passedSubmission || null; // the page's latest run passed (its own page only)
  let running = null;
  if (submission) {
    button.disabled = false;
    status.textContent = "Your latest code passes every test: it can drive a live run.";
  }
  stop.addEventListener("click", () => { if (running) running.cancel(); });

  // exercise.js says how each "Run tests" ended: only the latest run, if it passed, may drive a live run.
  exercise.addEventListener("exercise-result", (event) => {
    submission = event.detail.passed ? event.detail.id : null;
    if (!running) button.disabled = !submission;
    status.textContent = submission
      ? "All the tests pass: your code can now drive a live run."
      : WAITING;
  });

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!submission || running) return;
    const params = { submission };
    for (const name of FIELDS) params[name] = valueOf(spec.params[name], inputs[name]);
    button.disabled = true;
    body.replaceChildren();
    text.textContent = "";
    summary.textContent = "";
    result.hidden = false;
    box.classList.remove("is-failed");
    status.textContent = "Starting the run…";
    const rows = [];
    let lastRound = null;
    let kind = "";
    const finish = (message, failed) => {
      running = null;
      stop.hidden = true;
      button.disabled = !submission;
      status.textContent = message;
      box.classList.toggle("is-failed", failed);
    };
    stop.hidden = false;
    running = getSocket().start(spec.name, params, {
      onAccepted: () => { status.textContent = "Waiting for the engine…"; },
      onQueued: (frame) => { status.textContent = queueText(frame); },
      onEvent: (ev) => {
        if (ev.type === "token") {
          status.textContent = "Generating: your sampler chooses each token…";
          text.textContent += ev.text;
        } else if (ev.type === "spec_round") {
          status.textContent = "Generating: your draft guesses, the model checks…";
          lastRound = ev;
        } else if (ev.type === "run_finished") {
          text.textContent = ev.text; // the whole answer (a speculative run's rounds emit several tokens each)
        } else if (ev.type === "student_choice" || ev.type === "student_draft") {
          kind = ev.type;
          rows.push(ev);
          if (ev.type === "student_choice") choiceRow(body, ev);
          else draftRow(body, ev, lastRound);
        }
      },
      onDone: (frame) => {
        summary.textContent = summaryText(rows, kind);
        const reason = (frame.summary || {}).finish_reason;
        finish(reason === "cancelled" ? "The run was stopped." : "Done: your code drove the whole run.", false);
      },
      onError: (frame) => finish(`The run stopped: ${frame.message || frame.code}`, true),
    }, { live: true });
  });
}
