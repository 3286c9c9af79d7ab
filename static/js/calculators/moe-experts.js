// Expert-parallelism calculator: a mixture-of-experts model's experts spread over devices. How many weights a token
// reads against how many the devices hold, how many tokens each expert gets from a batch (why MoE serving wants big
// batches), and the bytes each device moves in a layer's two all-to-alls. Props: {"model", "devices", "tokens"}.
import { MOE_MODELS, fmtGB, moeCaption, moeFigures } from "./moe-math.js";
import { BASE_LAYOUT, PLOT_CONFIG, autoMount, chartBlock, el, ensurePlotly, numberField, outputs, selectField } from "./ui.js";

export function mount(root, props = {}) {
  const start = MOE_MODELS[props.model] ? props.model : "mixtral-8x7b";
  const model = selectField("Model", Object.entries(MOE_MODELS).map(([k, m]) => [k, m.label]), start);
  const devices = numberField("Devices (expert parallel)", props.devices || 8, { min: 1, max: 256, step: 1,
    help: "The experts must divide evenly over them" });
  const tokens = numberField("Tokens in the batch (all devices)", props.tokens || 256, { min: 1, max: 1_000_000, step: 1 });
  const status = el("p", { class: "ilab-calc__status", role: "status" });
  const out = outputs([["active", "Weights a token reads (share of the experts)"], ["perDevice", "Experts per device, a layer"],
    ["bytes", "Expert weights per device (bf16)"], ["perExpert", "Tokens per expert, on average"],
    ["a2a", "All-to-all bytes per device, a layer"]], "Expert parallelism figures");
  const chart = chartBlock("Bar chart: tokens each expert receives from the batch, against the devices that hold them");
  root.append(el("div", { class: "ilab-calc" }, el("h3", { text: "Expert-parallelism calculator" }),
    el("form", { "aria-label": "Expert parallelism inputs" },
      el("fieldset", {}, el("legend", { text: "Model and deployment" }), model.label, devices.label, tokens.label)),
    status, out.node, chart.figure));

  let Plotly = null;
  ensurePlotly(props.plotlyUrl).then((P) => { Plotly = P; update(); }).catch(() => {});
  for (const f of [model, devices, tokens]) f.input.addEventListener("input", update);
  model.input.addEventListener("change", update);

  function update() {
    const m = MOE_MODELS[model.input.value];
    const d = Math.round(+devices.input.value);
    const n = Math.round(+tokens.input.value);
    let f;
    try {
      f = moeFigures({ ...m, devices: d, tokens: n });
    } catch (err) {
      status.textContent = `Check the inputs: ${err.message}.`;
      status.classList.add("is-error");
      return;
    }
    status.textContent = "";
    status.classList.remove("is-error");
    out.set("active", `${(f.activeWeightsPerToken / 1e9).toFixed(1)} B of ${(f.expertWeights / 1e9).toFixed(1)} B (${(100 * f.activeShare).toFixed(1)}%)`);
    out.set("perDevice", String(f.expertsPerDevice));
    out.set("bytes", fmtGB(f.weightBytesPerDevice));
    out.set("perExpert", f.tokensPerExpert.toFixed(1));
    out.set("a2a", fmtGB(f.allToAllBytesPerLayer));
    chart.summary.textContent = moeCaption(m.label, f, d, n);
    if (!Plotly) return;
    const shown = Math.min(m.experts, 64);  // one bar per expert, the first 64 of a large model
    const x = Array.from({ length: shown }, (_, e) => `expert ${e}`);
    const device = (e) => Math.floor(e / f.expertsPerDevice);
    Plotly.react(chart.chart, [{ type: "bar", x, y: x.map(() => f.tokensPerExpert),
      marker: { color: x.map((_, e) => (device(e) % 2 ? "#1f77b4" : "#9ecae1")) },
      customdata: x.map((_, e) => device(e)),
      hovertemplate: "%{x} on device %{customdata}<br>%{y:.1f} tokens on average<extra></extra>" }], {
      ...BASE_LAYOUT, height: 320, title: { text: `Tokens per expert from a batch of ${n.toLocaleString("en-US")} (colour: device)` },
      xaxis: { type: "category", showticklabels: shown <= 16, title: { text: shown < m.experts ? `the first ${shown} of ${m.experts} experts` : "expert" } },
      yaxis: { title: { text: "tokens (balanced routing)" }, rangemode: "tozero" },
    }, PLOT_CONFIG);
  }
}

autoMount("moe-experts", mount);
