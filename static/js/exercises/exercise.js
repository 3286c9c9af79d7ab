// Code exercises (templates/exercises/_widget.html): the CodeMirror editor over the form's textarea, "Run tests"
// (POST → 202 and a URL to poll, exercises/views.py) and the results table. Without this script, or if the editor
// bundle fails to load, the plain textarea stays usable.

const POLL_FAST_MS = 100; // the first seconds: a trivial exercise is graded in well under one
const POLL_SLOW_MS = 400;
const FAST_POLLS = 30;
const GIVE_UP_MS = 90_000; // past the server's own queue timeout, which answers with a message first

async function loadEditor() {
  try {
    return await import("../../vendor/codemirror/codemirror.min.js");
  } catch (err) {
    console.warn("exercise editor unavailable, keeping the plain text area", err);
    return null;
  }
}

function mountEditor(cm, textarea, section) {
  const label = section.querySelector(".exercise-label");
  const help = section.querySelector(`#${CSS.escape(textarea.getAttribute("aria-describedby") || "")}`);
  const holder = document.createElement("div");
  holder.className = "exercise-editor";
  textarea.after(holder);
  const view = new cm.EditorView({
    parent: holder,
    state: cm.EditorState.create({
      doc: textarea.value,
      extensions: [
        cm.lineNumbers(), cm.highlightActiveLineGutter(), cm.history(), cm.drawSelection(), cm.indentOnInput(),
        cm.bracketMatching(), cm.syntaxHighlighting(cm.defaultHighlightStyle, { fallback: true }),
        new cm.LanguageSupport(cm.pythonLanguage), cm.indentUnit.of("    "), cm.EditorState.tabSize.of(4),
        // Long lines wrap and the editor grows with the code: a region that scrolled inside the page would be one
        // a keyboard user could not scroll (axe: scrollable-region-focusable), and the page scrolls anyway.
        cm.EditorView.lineWrapping,
        cm.keymap.of([...cm.defaultKeymap, ...cm.historyKeymap, cm.indentWithTab]),
        cm.EditorView.contentAttributes.of({
          "aria-labelledby": label ? label.id : "", "aria-describedby": help ? help.id : "",
        }),
        cm.EditorView.updateListener.of((update) => {
          if (update.docChanged) textarea.value = update.state.doc.toString();
        }),
      ],
    }),
  });
  textarea.hidden = true; // still in the form: it carries the code when the page posts without this script
  if (label) label.addEventListener("click", () => view.focus());
  return {
    get: () => view.state.doc.toString(),
    set: (text) => view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } }),
  };
}

function csrfToken(form) {
  const field = form.querySelector('input[name="csrfmiddlewaretoken"]');
  if (field) return field.value;
  const cookie = document.cookie.split("; ").find((c) => c.startsWith("csrftoken="));
  return cookie ? decodeURIComponent(cookie.slice("csrftoken=".length)) : "";
}

function cell(row, text, { pre = false, muted = false, cls = "" } = {}) {
  const td = document.createElement("td");
  if (cls) td.className = cls;
  if (muted) {
    td.className = "is-hidden-value";
    td.textContent = text;
  } else if (pre && text) {
    const block = document.createElement("pre");
    block.textContent = text;
    td.append(block);
  } else {
    td.textContent = text;
  }
  row.append(td);
}

function renderResult(section, result) {
  const box = section.querySelector(".exercise-results");
  const summary = section.querySelector(".exercise-summary");
  const problem = section.querySelector(".exercise-problem");
  const body = section.querySelector(".exercise-table tbody");
  const outputBlock = section.querySelector(".exercise-output-block");
  box.hidden = false;
  body.replaceChildren();
  const tests = result.tests || [];
  summary.textContent = tests.length
    ? `${result.n_passed} of ${result.n_tests} tests pass${result.passed ? ": well done." : "."}`
    : "Your code was not run.";
  summary.className = `exercise-summary ${result.passed ? "is-pass" : "is-fail"}`;
  problem.hidden = !result.problem;
  problem.textContent = result.problem || "";
  for (const test of tests) {
    const row = document.createElement("tr");
    const name = document.createElement("th");
    name.scope = "row";
    name.textContent = test.name;
    row.append(name);
    cell(row, test.passed ? "✓ Passed" : "✗ Failed", { cls: test.passed ? "result-pass" : "result-fail" });
    if (test.hidden) {
      for (let i = 0; i < 3; i++) cell(row, "hidden", { muted: true });
    } else {
      cell(row, test.input, { pre: true });
      cell(row, test.expected, { pre: true });
      cell(row, test.got, { pre: true });
    }
    cell(row, test.message || "");
    body.append(row);
  }
  const output = result.output || "";
  outputBlock.hidden = !output;
  const dropped = result.output_dropped ? `\n… (${result.output_dropped.toLocaleString()} more characters not kept)` : "";
  section.querySelector(".exercise-output").textContent = output + dropped;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function poll(url) {
  const started = performance.now();
  for (let i = 0; performance.now() - started < GIVE_UP_MS; i++) {
    await sleep(i < FAST_POLLS ? POLL_FAST_MS : POLL_SLOW_MS);
    const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (!response.ok) throw new Error(`the run could not be read (HTTP ${response.status})`);
    const state = await response.json();
    if (state.status !== "queued" && state.status !== "running") return state;
  }
  throw new Error("no result after 90 s");
}

async function runTests(section, form, getCode) {
  const status = section.querySelector(".exercise-status");
  const button = form.querySelector(".exercise-run");
  button.disabled = true;
  status.textContent = "Running the tests…";
  try {
    const body = new FormData();
    body.append("code", getCode());
    const response = await fetch(section.dataset.runUrl, {
      method: "POST", body, credentials: "same-origin",
      headers: { "X-CSRFToken": csrfToken(form), Accept: "application/json" },
    });
    const answer = await response.json().catch(() => ({}));
    if (response.status !== 202) {
      const wait = answer.retry_after ? ` (try again in ${answer.retry_after} s)` : "";
      status.textContent = `${answer.message || `The tests could not start (HTTP ${response.status}).`}${wait}`;
      return;
    }
    const state = await poll(answer.poll);
    const result = state.result || {};
    if (state.status === "error") {
      renderResult(section, { ...result, tests: [], passed: false });
      status.textContent = result.problem || "Your code could not be run.";
      section.dispatchEvent(new CustomEvent("exercise-result", { detail: { id: String(state.id), passed: false } }));
      return;
    }
    renderResult(section, result);
    status.textContent = `Done: ${result.n_passed} of ${result.n_tests} tests pass.`;
    section.dataset.lastRun = String(state.id);
    // live-run.js listens: only a passing run's submission may drive a live run (the server checks it too)
    section.dispatchEvent(new CustomEvent("exercise-result", { detail: { id: String(state.id), passed: !!result.passed } }));
  } catch (err) {
    status.textContent = `The tests could not be run: ${err.message}.`;
  } finally {
    button.disabled = false;
  }
}

async function setUp(section, cm) {
  const form = section.querySelector(".exercise-form");
  const textarea = section.querySelector(".exercise-code");
  const editor = cm ? mountEditor(cm, textarea, section) : null;
  const getCode = () => (editor ? editor.get() : textarea.value);
  const starter = JSON.parse(section.querySelector('script[type="application/json"]').textContent);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    runTests(section, form, getCode);
  });
  section.querySelector(".exercise-reset").addEventListener("click", () => {
    if (editor) editor.set(starter);
    textarea.value = starter;
    section.querySelector(".exercise-status").textContent = "The starter code is back in the editor.";
  });
  if (section.querySelector(".exercise-live")) {
    const live = await import("./live-run.js");
    live.setUpLive(section);
  }
  section.dataset.ready = "true";
}

const sections = [...document.querySelectorAll("section.exercise:not([data-ready])")];
if (sections.length) {
  const cm = await loadEditor();
  for (const section of sections) setUp(section, cm);
}
