// Roofline calculator: attainable FLOP/s = min(peak, intensity × bandwidth) for GPUs and this machine,
// with the operating points of decode (batch b) and prefill (N prompt tokens) marked on each roof.
// Props: {"machine": {"label", "bandwidth_gbps", "peak_gflops", "note"?}, "batch", "prompt_tokens", "precision"}.
// A lesson writes "machine": "{{ server.machine }}": the server fills in this server's measured profile
// (serverprofile/figures.py), with a note saying when and how it was measured.
// Listens for `ilab:measured` events (detail: {bandwidth, flops, decodeIntensity, prefillIntensity}) from the
// prefill-decode demo and plots what the live run achieved.
import { GB, GPUS, attainableFlops, formatDecimal, matmulIntensity, ridgePoint } from "./formulas.js";
import { logTicks } from "../units.js";
import {
  BASE_LAYOUT, PLOT_CONFIG, autoMount, chartBlock, el, ensurePlotly, fmtNum, numberField, outputs, selectField,
} from "./ui.js";

const ROOF_GPUS = ["a100-80gb", "h100-sxm", "h200"];

/** Share of peak as text: one decimal below 10% (decode is often well under 1%). */
function pct(x, peak) {
  const v = (100 * x) / peak;
  return `${v < 10 ? v.toFixed(1) : Math.round(v)}%`;
}
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

export function mount(root, props = {}) {
  const devices = ROOF_GPUS.map((k) => ({ key: k, label: GPUS[k].label, bandwidth: GPUS[k].bandwidth, peak: GPUS[k].peakFlops, note: "BF16 dense" }));
  if (props.machine && props.machine.bandwidth_gbps && props.machine.peak_gflops) {
    devices.push({ key: "machine", label: props.machine.label || "This machine", bandwidth: props.machine.bandwidth_gbps * GB,
      peak: props.machine.peak_gflops * 1e9, note: props.machine.note || "measured" });
  }
  const precision = selectField("Weight precision", [["bf16", "BF16 (2 bytes)"], ["fp32", "FP32 (4 bytes)"], ["int8", "INT8 / FP8 (1 byte)"], ["int4", "INT4 (0.5 byte)"]], props.precision || "bf16");
  const batch = numberField("Decode batch size", props.batch || 1, { min: 1, max: 4096, step: 1, help: "sequences decoded together, one token each" });
  const prompt = numberField("Prompt tokens in one prefill", props.prompt_tokens || 1000, { min: 1, max: 1_000_000, step: 1 });
  const out = outputs([["decodeI", "Decode intensity (FLOP/byte)"], ["prefillI", "Prefill intensity (FLOP/byte)"]], "Operating points");
  const table = el("table", {}, el("caption", { text: "Each device's ridge point and what the two phases can reach on it" }),
    el("thead", {}, el("tr", {}, ...["Device", "Ridge (FLOP/byte)", "Decode reaches", "Prefill reaches"].map((t) => el("th", { scope: "col", text: t })))),
    el("tbody"));
  const chart = chartBlock("Log-log roofline chart: attainable FLOP per second against arithmetic intensity for each device, with decode and prefill marked");
  const live = el("p", { class: "ilab-calc__summary", "aria-live": "polite" });
  root.append(el("div", { class: "ilab-calc" }, el("h3", { text: "Roofline: when is a step bandwidth-bound?" }),
    el("form", { "aria-label": "Roofline inputs" }, el("fieldset", {}, el("legend", { text: "Workload" }), precision.label, batch.label, prompt.label)),
    out.node, table, chart.figure, live));

  let Plotly = null;
  let measured = null;
  ensurePlotly(props.plotlyUrl).then((P) => { Plotly = P; update(); }).catch(() => {});
  for (const f of [precision, batch, prompt]) f.input.addEventListener("input", update);
  document.addEventListener("ilab:measured", (e) => { measured = e.detail; update(); });

  function update() {
    const p = precision.input.value;
    const b = Math.max(1, Math.round(+batch.input.value));
    const n = Math.max(1, Math.round(+prompt.input.value));
    const dI = matmulIntensity(b, p);
    const pI = matmulIntensity(n, p);
    out.set("decodeI", fmtNum(dI));
    out.set("prefillI", fmtNum(pI));
    const rows = devices.map((d) => {
      const ridge = ridgePoint(d.peak, d.bandwidth);
      const dec = attainableFlops(dI, d.peak, d.bandwidth);
      const pre = attainableFlops(pI, d.peak, d.bandwidth);
      return { d, ridge, dec, pre };
    });
    table.querySelector("tbody").replaceChildren(...rows.map(({ d, ridge, dec, pre }) => el("tr", {},
      el("th", { scope: "row" }, d.label, el("br"), el("small", { text: `${formatDecimal(d.bandwidth, "B/s")}, ${formatDecimal(d.peak, "FLOP/s")} (${d.note})` })),
      el("td", { text: fmtNum(ridge) }),
      el("td", { text: `${formatDecimal(dec, "FLOP/s")} (${pct(dec, d.peak)} of peak)` }),
      el("td", { text: `${formatDecimal(pre, "FLOP/s")} (${pct(pre, d.peak)} of peak)` }))));
    const h100 = rows.find((r) => r.d.key === "h100-sxm");
    chart.summary.textContent = `Decode at batch ${b} does ${dI.toPrecision(3)} FLOPs per byte of ${p} weights; ` +
      `an H100 needs about ${h100.ridge.toFixed(0)} to keep its tensor cores busy, so decode reaches ` +
      `${pct(h100.dec, h100.d.peak)} of peak there, while a ${n.toLocaleString("en-US")}-token prefill reaches ${pct(h100.pre, h100.d.peak)}.`;
    if (measured) {
      live.textContent = `Live run on the course server: decode achieved ${formatDecimal(measured.bandwidth, "B/s")} at ` +
        `${measured.decodeIntensity.toPrecision(3)} FLOP/byte; prefill ${formatDecimal(measured.prefillFlops, "FLOP/s")} at ` +
        `${measured.prefillIntensity.toPrecision(3)} FLOP/byte.`;
    }
    if (!Plotly) return;
    const xs = [];
    for (let e = -2; e <= 4.01; e += 0.05) xs.push(10 ** e);
    const traces = [];
    rows.forEach(({ d }, i) => {
      const color = COLORS[i % COLORS.length];
      traces.push({ x: xs, y: xs.map((x) => attainableFlops(x, d.peak, d.bandwidth)), name: d.label, mode: "lines",
        line: { color }, hovertemplate: `${d.label}: %{y:.3s}FLOP/s at %{x:.3g} FLOP/byte<extra></extra>` });
      traces.push({ x: [dI, pI], y: [attainableFlops(dI, d.peak, d.bandwidth), attainableFlops(pI, d.peak, d.bandwidth)],
        mode: i === 0 || d.key === "machine" ? "markers+text" : "markers", text: ["decode", "prefill"], textposition: "top center", showlegend: false,
        marker: { color, size: 9, symbol: ["circle", "diamond"] }, hovertemplate: `${d.label} %{text}: %{y:.3s}FLOP/s<extra></extra>` });
    });
    if (measured) {
      traces.push({ x: [measured.decodeIntensity, measured.prefillIntensity],
        y: [measured.decodeIntensity * measured.bandwidth, measured.prefillFlops], mode: "markers", name: "live run (achieved)",
        marker: { color: "#000", size: 11, symbol: "x" } });
    }
    const ys = traces.flatMap((t) => t.y).filter((y) => y > 0);
    Plotly.react(chart.chart, traces, { ...BASE_LAYOUT, title: { text: "Roofline (log-log)" },
      xaxis: { title: { text: "arithmetic intensity (FLOPs per byte moved)" }, type: "log", ...logTicks(xs[0], xs[xs.length - 1]) },
      yaxis: { title: { text: "attainable FLOP/s" }, type: "log", ...logTicks(Math.min(...ys), Math.max(...ys)) }, legend: { orientation: "h", y: -0.35 },
      margin: { ...BASE_LAYOUT.margin, b: 90 } }, PLOT_CONFIG);
  }
  update();
}

autoMount("roofline", mount);
