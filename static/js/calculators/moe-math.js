// Mixture-of-experts arithmetic for the expert-parallelism calculator (moe-experts.js), without the page (tested
// under node). Shapes from the models' config.json: experts per MoE layer, experts each token is routed to (top-k),
// shared experts every token also runs, MoE layers, hidden size, and each expert's intermediate size (an expert is a
// SwiGLU MLP: gate, up and down, 3 × hidden × intermediate weights).

export const MOE_MODELS = {
  "mixtral-8x7b": { label: "Mixtral 8x7B (8 experts, top-2)", experts: 8, topK: 2, shared: 0, moeLayers: 32, hidden: 4096, expertFfn: 14336 },
  "qwen3-30b-a3b": { label: "Qwen3-30B-A3B (128 experts, top-8)", experts: 128, topK: 8, shared: 0, moeLayers: 48, hidden: 2048, expertFfn: 768 },
  "deepseek-v3": { label: "DeepSeek-V3 (256 routed + 1 shared, top-8)", experts: 256, topK: 8, shared: 1, moeLayers: 58, hidden: 7168, expertFfn: 2048 },
};

/** Figures of one MoE configuration spread over `devices` by expert parallelism, for a batch of `tokens` tokens
 * (all devices together) at `bytes` bytes a value. Throws RangeError on a shape that cannot be split. */
export function moeFigures({ experts, topK, shared = 0, moeLayers, hidden, expertFfn, devices, tokens, bytes = 2 }) {
  for (const [name, v] of Object.entries({ experts, topK, moeLayers, hidden, expertFfn, devices, tokens })) {
    if (!Number.isInteger(v) || v < 1) throw new RangeError(`${name} must be a whole number of at least 1`);
  }
  if (topK > experts) throw new RangeError("a token cannot be routed to more experts than there are");
  if (experts % devices) throw new RangeError(`${experts} experts do not divide evenly over ${devices} devices`);
  const perExpert = 3 * hidden * expertFfn;
  const perDeviceTokens = tokens / devices;
  // Each token's hidden state goes to its top-k experts and comes back (dispatch and combine, two all-to-alls); the
  // share of those experts on other devices is (devices − 1) / devices when the router spreads tokens evenly.
  const leaving = (devices - 1) / devices;
  return {
    expertWeights: experts * perExpert * moeLayers,
    activeWeightsPerToken: (topK + shared) * perExpert * moeLayers,
    activeShare: (topK + shared) / (experts + shared),
    expertsPerDevice: experts / devices,
    weightBytesPerDevice: ((experts / devices) + shared) * perExpert * moeLayers * bytes,
    tokensPerExpert: (tokens * topK) / experts,
    allToAllBytesPerLayer: 2 * perDeviceTokens * topK * hidden * bytes * leaving,
  };
}

const GB = 1e9;
export const fmtGB = (b) => (b >= 100 * GB ? `${Math.round(b / GB)} GB` : b >= GB ? `${(b / GB).toFixed(1)} GB`
  : b >= 1e6 ? `${(b / 1e6).toFixed(1)} MB` : `${(b / 1e3).toFixed(1)} kB`);
export const fmtCount = (n) => (n >= 1e9 ? `${(n / 1e9).toFixed(1)} B` : n >= 1e6 ? `${(n / 1e6).toFixed(0)} M` : `${Math.round(n)}`);

/** The calculator's sentence, from the same figures it shows. */
export function moeCaption(model, f, devices, tokens) {
  return `${model}: ${fmtCount(f.expertWeights)} expert weights, of which each token reads ${fmtCount(f.activeWeightsPerToken)} ` +
    `(${(100 * f.activeShare).toFixed(1)}% of the experts). On ${devices} device${devices > 1 ? "s" : ""}, each holds ` +
    `${f.expertsPerDevice} expert${f.expertsPerDevice > 1 ? "s" : ""} a layer (${fmtGB(f.weightBytesPerDevice)} of expert weights). ` +
    `A batch of ${tokens.toLocaleString("en-US")} tokens gives each expert ${f.tokensPerExpert.toFixed(1)} tokens on average, ` +
    `and each device sends and receives ${fmtGB(f.allToAllBytesPerLayer)} a layer in its two all-to-alls.`;
}
