// A lab in a lesson (`:::{lab}`; labs/embed.py renders its table and questions): a Run button per configuration
// that starts the student's own live run through the page's shared demo socket (never a replay: a replay is
// another run's numbers), the table and chart refreshed from the server after each run (labs/table.py), answers
// saved as they change and checked against the table, and Submit once every row has its runs.
// A static module, imported once however many labs a page has; it mounts every `.ilab-lab` on the page.
import { getSocket } from "../ws-client.js";
import { BASE_LAYOUT, PLOT_CONFIG, ensurePlotly, injectStyle } from "../calculators/ui.js";
import { chartSummary, chartTraces, missingText, queuedText, rowCells, scoreText } from "./lab-format.js";

const STYLE_ID = "ilab-lab-style";
const LAB_CSS = `
.ilab-lab .ilab-lab__table td[data-cell="action"] { text-align: left; }
.ilab-lab .ilab-lab__table td[data-cell="action"] small { display: block; color: #444; font-weight: 400; }
.ilab-lab .ilab-lab__table th small { font-weight: 400; color: #555; }
.ilab-lab .ilab-lab__q { margin: .9rem 0; }
.ilab-lab .ilab-lab__q > label, .ilab-lab legend { font-weight: 600; display: block; margin-bottom: .3rem; }
.ilab-lab .ilab-lab__q fieldset { display: block; }
.ilab-lab .ilab-lab__q textarea { width: 100%; }
.ilab-lab .ilab-lab__feedback { margin: .3rem 0 0; }
.ilab-lab .ilab-lab__feedback.is-right { color: #1a7f37; }
.ilab-lab .ilab-lab__feedback.is-wrong { color: #b00020; }
.ilab-lab .ilab-lab__buttons { display: flex; gap: .6rem; flex-wrap: wrap; }
.ilab-lab .ilab-lab__score { font-weight: 600; }
`;
const POLL_MS = 4000; // while a row has a run in progress that this page did not start (started before a reload)

function addStyle() {
  injectStyle();
  if (document.getElementById(STYLE_ID)) return;
  const style = document.createElement("style");
  style.id = STYLE_ID;
  style.textContent = LAB_CSS;
  document.head.append(style);
}

function csrfToken() {
  const holder = document.querySelector("[data-csrf]");
  if (holder && holder.dataset.csrf) return holder.dataset.csrf;
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

class Lab {
  constructor(root, config) {
    this.root = root;
    this.config = config;
    this.lab = config.lab;
    const slug = location.pathname.match(/^\/modules\/([a-z0-9]+(?:-[a-z0-9]+)*)\//);
    this.slug = slug ? slug[1] : null;
    this.status = root.querySelector(".ilab-lab__status");
    this.chart = root.querySelector(".ilab-lab__chart");
    this.form = root.querySelector(".ilab-lab__questions");
    this.running = new Map(); // params key → {handle, rows: [config ids]}
    this.table = null;
    this.attempt = null;
    this.answersShown = false;
    this.checked = false;
    this.plotly = ensurePlotly(config.plotlyUrl).catch(() => null);
  }

  url(name) {
    return this.config.urls[name].replace(this.config.modulePlaceholder, this.slug);
  }

  say(text, error = false) {
    this.status.textContent = text;
    this.status.classList.toggle("is-error", error);
  }

  mount() {
    if (!this.slug) {
      this.say("This lab runs on the module's own page (its runs and answers are saved there).");
      return;
    }
    for (const config of this.lab.configs) {
      const cell = this.cell(config.id, "action");
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "Run";
      button.setAttribute("aria-label", `Run ${config.label}`);
      button.addEventListener("click", () => this.run(config));
      const note = document.createElement("small");
      note.className = "ilab-lab__row-status";
      cell.replaceChildren(button, note);
    }
    if (this.form) {
      this.form.addEventListener("change", () => this.save(false));
      this.form.querySelector('[data-action="check"]').addEventListener("click", () => this.save(true));
      this.form.querySelector('[data-action="submit"]').addEventListener("click", () => this.submit());
    }
    this.refresh();
  }

  cell(configId, name) {
    return this.root.querySelector(`tr[data-config="${CSS.escape(configId)}"] td[data-cell="${name}"]`);
  }

  /** Configurations measured by the same runs (same params): one run fills all of them. */
  sameRuns(config) {
    const key = JSON.stringify(config.params);
    return { key, rows: this.lab.configs.filter((c) => JSON.stringify(c.params) === key).map((c) => c.id) };
  }

  rowNote(ids, text) {
    for (const id of ids) this.cell(id, "action").querySelector(".ilab-lab__row-status").textContent = text;
  }

  run(config) {
    const { key, rows } = this.sameRuns(config);
    if (this.running.has(key)) return;
    const label = config.label;
    const entry = { rows, handle: null };
    this.running.set(key, entry);
    this.updateButtons();
    this.rowNote(rows, "Starting…");
    this.say(`${label}: starting a live run.`);
    const finish = (text, error = false) => {
      this.running.delete(key);
      this.rowNote(rows, text);
      this.say(`${label}: ${text}`, error);
      this.refresh();
    };
    entry.handle = getSocket(this.config.wsPath).start(this.lab.demo, config.params, {
      onAccepted: () => this.rowNote(rows, "Accepted: waiting for a worker…"),
      onQueued: (frame) => {
        const text = queuedText(frame);
        this.rowNote(rows, text);
        this.say(`${label}: ${text}.`);
      },
      onHeader: (frame) => this.rowNote(rows, `Running on ${frame.device || "the worker"}…`),
      onDone: (frame) => finish(frame.status === "done" ? "Run finished: the table is updated." : `Run ${frame.status}.`),
      onError: (frame) => finish(`Not run: ${frame.message || frame.code}`, true),
    }, { live: true });
  }

  async request(name, body) {
    const options = body === undefined ? { credentials: "same-origin" } : {
      method: "POST", credentials: "same-origin", body: JSON.stringify(body),
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
    };
    const response = await fetch(this.url(name), options);
    let data = {};
    try { data = await response.json(); } catch { /* not JSON: said below */ }
    if (!response.ok && !data.error) data.error = `The server answered ${response.status}.`;
    return data;
  }

  async refresh() {
    try {
      const data = await this.request("table");
      if (data.error) this.say(data.error, true);
      else this.apply(data);
    } catch (error) {
      this.say(`Could not read your runs: ${error.message}`, true);
    }
  }

  apply(data) {
    if (data.table) this.showTable(data.table);
    if (data.attempt) this.showAttempt(data.attempt);
    this.updateButtons();
    clearTimeout(this.pollTimer);
    // A run this page did not start (before a reload, or in another tab) is still queued or running: look again.
    if (this.table && this.table.rows.some((r) => r.active) && !this.running.size) {
      this.pollTimer = setTimeout(() => this.refresh(), POLL_MS);
    }
  }

  showTable(table) {
    this.table = table;
    for (const row of table.rows) {
      const cells = rowCells(row, table.metric);
      for (const name of ["runs", "median", "spread", "setup"]) this.cell(row.id, name).textContent = cells[name];
      const button = this.cell(row.id, "action").querySelector("button");
      button.textContent = row.runs ? "Run again" : "Run";
      button.setAttribute("aria-label", row.runs ? `Run ${row.label} again` : `Run ${row.label}`);
    }
    this.chart.setAttribute("aria-label", chartSummary(table));
    this.plotly.then((Plotly) => {
      if (!Plotly) return;
      const m = table.metrics[table.metric];
      Plotly.react(this.chart, chartTraces(table), {
        ...BASE_LAYOUT, title: { text: `Your runs: median ${m.label}, whiskers to the slowest and fastest` },
        yaxis: { title: { text: m.unit }, rangemode: "tozero" }, showlegend: false,
      }, PLOT_CONFIG);
    });
  }

  showAttempt(attempt) {
    this.attempt = attempt;
    if (this.form && !this.answersShown) { // fill the inputs once: never over what the student is typing
      this.answersShown = true;
      for (const [id, value] of Object.entries(attempt.answers || {})) {
        for (const input of this.form.querySelectorAll(`[name="${CSS.escape(id)}"]`)) {
          if (input.type === "radio") input.checked = input.value === value;
          else input.value = value;
        }
      }
    }
    if (this.checked || attempt.submitted_at) this.showFeedback(attempt.feedback || {});
    const score = this.form && this.form.querySelector(".ilab-lab__score");
    if (score) score.textContent = scoreText(attempt) || missingText(this.table || { complete: true });
  }

  showFeedback(feedback) {
    for (const [id, item] of Object.entries(feedback)) {
      const node = this.form.querySelector(`[data-question="${CSS.escape(id)}"] .ilab-lab__feedback`);
      if (!node) continue;
      const mark = item.correct === true ? "✓ " : item.correct === false ? "✗ " : "";
      node.textContent = mark + item.message;
      node.classList.toggle("is-right", item.correct === true);
      node.classList.toggle("is-wrong", item.correct === false);
    }
  }

  answers() {
    const answers = {};
    for (const q of this.lab.questions) {
      const inputs = [...this.form.querySelectorAll(`[name="${CSS.escape(q.id)}"]`)];
      const chosen = inputs.find((i) => i.type !== "radio" || i.checked);
      answers[q.id] = chosen ? chosen.value : "";
    }
    return answers;
  }

  async save(check) {
    if (!this.slug || (this.attempt && this.attempt.submitted_at)) return;
    if (check) this.checked = true;
    const seq = (this.saveSeq = (this.saveSeq || 0) + 1);
    try {
      const data = await this.request("answers", { answers: this.answers() });
      if (seq !== this.saveSeq) return; // a later save (a Check right after a change) answers for both
      this.apply(data);
      if (data.error) this.say(data.error, true);
      else this.say(check ? "Answers saved and checked against your runs." : "Answers saved.");
    } catch (error) {
      this.say(`Could not save your answers: ${error.message}`, true);
    }
  }

  async submit() {
    try {
      const data = await this.request("submit", { answers: this.answers() });
      this.apply(data);
      if (data.error) {
        this.say(data.error, true);
        return;
      }
      this.say(scoreText(data.attempt));
      const score = this.form.querySelector(".ilab-lab__score");
      score.focus();
    } catch (error) {
      this.say(`Could not submit: ${error.message}`, true);
    }
  }

  updateButtons() {
    const submitted = Boolean(this.attempt && this.attempt.submitted_at);
    for (const config of this.lab.configs) {
      const button = this.cell(config.id, "action").querySelector("button");
      if (button) button.disabled = this.running.has(this.sameRuns(config).key);
    }
    if (!this.form) return;
    this.form.querySelector('[data-action="check"]').disabled = submitted;
    this.form.querySelector('[data-action="submit"]').disabled = submitted || !(this.table && this.table.complete);
    for (const input of this.form.querySelectorAll("input, textarea")) input.disabled = submitted;
  }
}

export function mountLabs(scope = document) {
  addStyle();
  for (const root of scope.querySelectorAll(".ilab-lab")) {
    if (root.dataset.mounted) continue;
    root.dataset.mounted = "1";
    const config = JSON.parse(root.querySelector(".ilab-lab__config").textContent);
    new Lab(root, config).mount();
  }
}

mountLabs();
