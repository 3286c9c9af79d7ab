// Inside a GGUF file: the course model's own file, its header and metadata, then its tensors one by one. One chart is
// the picture: every tensor's bytes coloured by its type (the step's tensor marked), and below, the step's block of
// 32 weights as stored (its codes) beside the same weights dequantized and the values our engine holds. The step
// timeline (gguf-steps.js) walks the file, then each tensor; the cards follow it.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, numberField, outputs } from "../calculators/ui.js";
import { demoShell, intIn } from "./course-demo-kit.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";
import { fmtBits, fmtBytes, ggufSteps } from "./gguf-steps.js";

const TYPE_COLORS = { Q4_1: "#1f77b4", Q4_0: "#17becf", Q8_0: "#d62728", F32: "#2ca02c", F16: "#9467bd" };
const OTHER = "#8c564b";
const CARDS = ["tensor", "type", "bytes", "bits", "engine"];

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/gguf_inspect.py), embedded in the page.
  const sp = specParams(config);
  const layers = numberField("Transformer layers to walk", sp.value("layers"), sp.range("layers", { step: 1 }));
  const block = numberField("Block of 32 weights shown", sp.value("block"), sp.range("block", { step: 1 }));
  const out = outputs([["tensor", "Tensor at this step"], ["type", "GGUF type"], ["bytes", "Bytes in the file"],
    ["bits", "Bits per weight"], ["engine", "Engine's values against the block"]], "GGUF tensor at this step");
  const chart = chartBlock("Picture of this step: bytes per tensor coloured by type, and one block of 32 weights as stored beside the same weights dequantized and as our engine holds them");
  let Plotly = null;
  let steps = ggufSteps();

  const shell = demoShell(root, config, {
    title: "Inside a GGUF file",
    fields: [layers.label, block.label],
    getParams() {
      return { layers: intIn(layers.input, "Layers", sp.min("layers"), sp.max("layers")),
        block: intIn(block.input, "Block", sp.min("block"), sp.max("block")) };
    },
    onStart(params) {
      fillForm({ layers: layers.input, block: block.input }, params);
      steps = ggufSteps();
      for (const k of CARDS) out.set(k, "–");
      chart.summary.textContent = "";
    },
    onEvent() {},
    steps: { fromEvent: (ev) => steps.fromEvent(ev), draw, picture: () => [out.node, chart.figure] },
  });
  shell.body.append(out.node, chart.figure);
  shell.plotly.then((P) => { Plotly = P; });

  function draw(step) {
    chart.summary.textContent = step.caption;
    const ev = step.ev;
    if (step.kind === "tensor") {
      out.set("tensor", ev.name);
      out.set("type", ev.ggml_type);
      out.set("bytes", fmtBytes(ev.n_bytes));
      out.set("bits", fmtBits(ev.bits_per_weight));
      out.set("engine", ev.max_abs_diff === 0 ? "identical" : `within ${ev.max_abs_diff.toExponential(1)}`);
    } else {
      for (const k of CARDS) out.set(k, "–");
      out.set("tensor", `${ev.n_tensors} tensors`);
      out.set("bytes", fmtBytes(ev.file_bytes));
    }
    if (Plotly && step.file) paint(step);
  }

  function paint(step) {
    const tensors = step.file.tensors;
    const types = [...new Set(tensors.map((t) => t.type))];
    const bars = types.map((type) => {
      const idx = tensors.map((t, i) => (t.type === type ? i : -1)).filter((i) => i >= 0);
      return { type: "bar", name: `${type} tensors`, x: idx, y: idx.map((i) => tensors[i].n_bytes / 1024),
        customdata: idx.map((i) => tensors[i].name), marker: { color: TYPE_COLORS[type] || OTHER },
        hovertemplate: "%{customdata}<br>%{y:.1f} KiB<extra></extra>" };
    });
    const traces = [...bars];
    const layout = {
      ...BASE_LAYOUT, title: { text: "Bytes per tensor by GGUF type; one block below" },
      height: 560, showlegend: true, legend: { orientation: "h", y: -0.12, yanchor: "top" }, barmode: "overlay", bargap: 0,
      margin: { ...BASE_LAYOUT.margin, b: 100 },
      xaxis: { domain: [0, 1], anchor: "y", title: { text: "tensor, in file order" } },
      yaxis: { domain: [0.55, 1], type: "log", title: { text: "KiB (log)" } },
      xaxis2: { domain: [0, 0.46], anchor: "y2", title: { text: "weight in the block" } },
      yaxis2: { domain: [0, 0.38], anchor: "x2", title: { text: "stored code" } },
      xaxis3: { domain: [0.54, 1], anchor: "y3", title: { text: "weight in the block" } },
      yaxis3: { domain: [0, 0.38], anchor: "x3", title: { text: "value" } },
      shapes: [],
    };
    if (step.kind === "tensor") {
      const ev = step.ev;
      const k = ev.dequantized.map((_, i) => i);
      layout.shapes = [{ type: "line", xref: "x", yref: "paper", x0: ev.index, x1: ev.index, y0: 0.55, y1: 1,
        line: { color: "#111", width: 2 } }];
      if (ev.codes.length) {
        traces.push({ type: "bar", name: "stored codes", x: k, y: ev.codes, xaxis: "x2", yaxis: "y2",
          marker: { color: "#9ca3af" }, hovertemplate: "weight %{x}<br>code %{y}<extra></extra>" });
      }
      traces.push({ type: "scatter", mode: "markers", name: "dequantized", x: k, y: ev.dequantized,
        xaxis: "x3", yaxis: "y3", marker: { size: 9, color: "#111" }, hovertemplate: "weight %{x}<br>%{y:.5f}<extra></extra>" });
      traces.push({ type: "scatter", mode: "markers", name: "engine's values", x: k, y: ev.engine,
        xaxis: "x3", yaxis: "y3", marker: { size: 14, color: "rgba(0,0,0,0)", line: { color: "#ff7f0e", width: 2 } },
        hovertemplate: `${ev.engine_name}<br>weight %{x}<br>%{y:.5f}<extra></extra>` });
    }
    Plotly.react(chart.chart, traces, layout, PLOT_CONFIG);
  }
  return shell;
}
