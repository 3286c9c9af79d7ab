// The deployment decision framework as an interactive chooser: answer five questions, get ranked suggestions,
// each with its reason (rules in formulas.js chooseDeployment, unit-tested).
import { chooseDeployment } from "./formulas.js";
import { autoMount, checkField, el, numberField, selectField } from "./ui.js";

export function mount(root, props = {}) {
  const where = selectField("Where will it run?", [["cloud", "Cloud GPUs I rent"], ["own-gpus", "My own GPU servers"], ["laptop", "A laptop or CPU box"]], props.where || "cloud");
  const traffic = selectField("How much traffic?", [["low", "Low or bursty (a few requests a minute)"], ["steady", "Steady"], ["high", "High and constant"]], props.traffic || "steady");
  const latency = selectField("Who waits for the answer?", [["interactive", "A person, live (chat, code completion)"], ["batch", "Nobody: offline or batch jobs"]], props.latency || "interactive");
  const quality = selectField("Quality vs cost", [["max", "Maximum quality"], ["balanced", "Balanced"], ["cheap", "Lowest cost"]], props.quality || "balanced");
  const shared = checkField("Many requests share a long prefix (system prompt, documents, agent loops)", props.sharedPrefix);
  const modelGB = numberField("Model weights at 16-bit (GB)", props.modelGB ?? 16, { min: 0, max: 4000, step: "any" });
  const gpuGB = numberField("Memory per GPU (GB)", props.gpuMemoryGB ?? 80, { min: 1, max: 1000, step: "any" });
  const list = el("ol", { class: "ilab-calc__recs", "aria-live": "polite", "aria-label": "Suggestions, most important first" });
  root.append(el("div", { class: "ilab-calc" }, el("h3", { text: "Deployment chooser" }),
    el("form", { "aria-label": "Deployment questions" }, el("fieldset", {}, el("legend", { text: "Your situation" }),
      where.label, traffic.label, latency.label, quality.label, modelGB.label, gpuGB.label, el("div", { class: "ilab-calc__wide" }, shared.label))),
    el("h4", { text: "Suggestions" }), list));
  for (const f of [where, traffic, latency, quality, shared, modelGB, gpuGB]) {
    f.input.addEventListener("input", update);
    f.input.addEventListener("change", update);
  }
  function update() {
    const recs = chooseDeployment({ where: where.input.value, traffic: traffic.input.value, latency: latency.input.value,
      sharedPrefix: shared.input.checked, quality: quality.input.value, modelGB: +modelGB.input.value, gpuMemoryGB: +gpuGB.input.value });
    list.replaceChildren(...recs.map((r) => el("li", { "data-rec": r.id }, el("strong", { text: r.title }), ` — ${r.reason}`)));
  }
  update();
}

autoMount("deployment-chooser", mount);
