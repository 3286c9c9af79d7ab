// Engine dashboard: streams worker stats over /ws/demos/dashboard/ into a table and Plotly charts.
import { wsUrl } from "../ws-client.js";

const WINDOW = 120; // points kept per series (about two minutes)
const $ = (id) => document.getElementById(id);
const Plotly = window.Plotly;
const series = new Map(); // worker name → trace index in the tokens/s chart

// No mode bar: its buttons would be focusable inside a role="img" chart (nested-interactive).
const CONFIG = { responsive: true, displaylogo: false, displayModeBar: false };
const base = { margin: { l: 50, r: 10, t: 40, b: 40 }, font: { size: 12 }, legend: { orientation: "h", y: -0.2 } };
Plotly.newPlot($("dash-tps"), [], { ...base, title: { text: "Tokens/s per worker" },
  xaxis: { type: "date" }, yaxis: { rangemode: "tozero" } }, CONFIG);
Plotly.newPlot($("dash-queue"), [
  { x: [], y: [], name: "demo queue length", mode: "lines" },
  { x: [], y: [], name: "batch size (all workers)", mode: "lines" },
], { ...base, title: { text: "Queue and batch" }, xaxis: { type: "date" }, yaxis: { rangemode: "tozero" } },
CONFIG);

function cell(text) { const td = document.createElement("td"); td.textContent = text; return td; }

const STATES = { running: "running", restarting: "restarting…", given_up: "given up (restart make run)",
  stopped: "stopped", starting: "starting" };

// What `make run` supervises: each process's state and restarts (absent when the stack runs another way).
function renderProcesses(processes) {
  $("dash-processes").hidden = !processes.length;
  const tbody = $("dash-processes-table").querySelector("tbody");
  tbody.replaceChildren();
  for (const p of processes) {
    const tr = document.createElement("tr");
    const name = document.createElement("th");
    name.scope = "row";
    name.textContent = p.name;
    const last = p.last_restart ? new Date(p.last_restart * 1000).toLocaleTimeString() : "–";
    tr.append(name, cell(STATES[p.state] || p.state), cell(p.restarts), cell(last), cell(p.last_exit ?? "–"));
    tbody.append(tr);
  }
}

function render(stats) {
  renderProcesses(stats.processes || []);
  const t = new Date(stats.t * 1000);
  const tbody = $("dash-workers").querySelector("tbody");
  tbody.replaceChildren();
  if (!stats.workers.length) {
    const tr = document.createElement("tr");
    const td = cell("No worker is running.");
    td.colSpan = 12;
    tr.append(td);
    tbody.append(tr);
  }
  let inFlight = 0;
  for (const w of stats.workers) {
    inFlight += w.batch_size;
    const tr = document.createElement("tr");
    const name = document.createElement("th");
    name.scope = "row";
    name.textContent = w.name;
    const device = w.device ? [w.device, w.dtype, w.kernel].filter(Boolean).join(" · ") : "loading";
    // how many forwards each path ran (CUDA graph replays are the "graph hits"), busiest first
    const paths = Object.entries(w.steps_by_path || {}).sort((a, b) => b[1] - a[1]);
    const byPath = paths.length ? paths.map(([k, v]) => `${k}: ${v}`).join(" · ") : "–";
    tr.append(name, cell(device), cell(byPath), cell(`${w.batch_size} (${w.max_batch_size})`), cell(w.waiting),
      cell(`${w.kv_blocks_used} / ${w.kv_blocks_total}`), cell(w.runs_active), cell(w.tokens_per_s.toFixed(1)),
      cell(w.tokens_total), cell(w.runs_total), cell(w.runs_failed), cell(`${Math.round(w.uptime_s)} s`));
    tbody.append(tr);
    if (!series.has(w.name)) {
      series.set(w.name, series.size);
      Plotly.addTraces($("dash-tps"), { x: [], y: [], name: w.name, mode: "lines" });
    }
    Plotly.extendTraces($("dash-tps"), { x: [[t]], y: [[w.tokens_per_s]] }, [series.get(w.name)], WINDOW);
  }
  const waiting = stats.queue[stats.demo_queue];
  Plotly.extendTraces($("dash-queue"), { x: [[t], [t]], y: [[waiting], [inFlight]] }, [0, 1], WINDOW);
  $("dash-queue-name").textContent = stats.demo_queue;
  $("dash-queue-gpu").textContent = waiting;
  $("dash-queue-cpu").textContent = stats.queue.cpu;
  $("dash-runs").textContent = Object.entries(stats.runs_last_hour).map(([k, v]) => `${k} ${v}`).join(", ");
}

let attempt = 0;
function connect() {
  const ws = new WebSocket(wsUrl("/ws/demos/dashboard/"));
  ws.onopen = () => { attempt = 0; $("dash-conn").textContent = "Live."; };
  ws.onmessage = (e) => {
    const msg = JSON.parse(e.data);
    if (msg.type === "stats") render(msg);
    else if (msg.type === "error") $("dash-conn").textContent = `Stats unavailable: ${msg.message}`;
  };
  ws.onclose = () => {
    const delay = Math.min(8000, 500 * 2 ** attempt++);
    $("dash-conn").textContent = `Disconnected; retrying in ${Math.round(delay / 1000)} s…`;
    setTimeout(connect, delay);
  };
}
connect();
