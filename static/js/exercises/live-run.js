// "Use my sampler in a live run" (templates/exercises/_live_run.html): once the exercise's tests all pass, the
// passing submission drives a run of the `student-sampler` demo (exercises/live_run.py) on the shared demo socket;
// each `student_choice` event becomes a row, the student's token beside the engine's own sampler's.
import { getSocket, queueText } from "../ws-client.js";

const FIELDS = ["prompt", "temperature", "top_k", "top_p", "max_new_tokens"]; // the rest: the page's own choice
const WAITING = "Pass every test first: then your sampler can drive a run.";

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

function row(body, choice) {
  const tr = document.createElement("tr");
  const head = document.createElement("th");
  head.scope = "row";
  head.textContent = String(choice.step + 1);
  tr.append(head);
  const cells = [
    JSON.stringify(choice.text), JSON.stringify(choice.builtin_text), choice.same ? "yes" : "no",
    choice.u.toFixed(3), String(choice.rank + 1), `${(choice.probability * 100).toFixed(1)}%`,
  ];
  cells.forEach((text, i) => {
    const td = document.createElement("td");
    td.textContent = text;
    if (i === 2) td.className = choice.same ? "result-pass" : "result-differs";
    tr.append(td);
  });
  tr.dataset.tokenId = String(choice.token_id);
  body.append(tr);
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
  for (const name of FIELDS) {
    const made = field(name, spec.params[name], `${box.id}-${name}`);
    inputs[name] = made.input;
    box.querySelector(".exercise-live-fields").append(made.wrap);
  }
  let submission = null;
  let running = null;

  // exercise.js says how each "Run tests" ended: only the latest run, if it passed, may drive a live run.
  exercise.addEventListener("exercise-result", (event) => {
    submission = event.detail.passed ? event.detail.id : null;
    if (!running) button.disabled = !submission;
    status.textContent = submission
      ? "All the tests pass: your sampler can now drive a live run."
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
    const choices = [];
    const finish = (message, failed) => {
      running = null;
      button.disabled = !submission;
      status.textContent = message;
      box.classList.toggle("is-failed", failed);
    };
    running = getSocket().start(spec.name, params, {
      onAccepted: () => { status.textContent = "Waiting for the engine…"; },
      onQueued: (frame) => { status.textContent = queueText(frame); },
      onEvent: (ev) => {
        if (ev.type === "token") {
          status.textContent = "Generating: your sampler chooses each token…";
          text.textContent += ev.text;
        } else if (ev.type === "student_choice") {
          choices.push(ev);
          row(body, ev);
        }
      },
      onDone: (frame) => {
        const same = choices.filter((c) => c.same).length;
        summary.textContent = `Your sampler chose ${choices.length} tokens; the engine's own sampler picked the ` +
          `same token ${same} of ${choices.length} times.`;
        const reason = (frame.summary || {}).finish_reason;
        finish(reason === "cancelled" ? "The run was stopped." : "Done: the run was generated by your sampler.",
          false);
      },
      onError: (frame) => finish(`The run stopped: ${frame.message || frame.code}`, true),
    }, { live: true });
  });
}
