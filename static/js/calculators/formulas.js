// Pure formulas behind the course calculators: no DOM, no Plotly, unit-tested in tests/js/formulas.test.mjs.
//
// Units: bytes (B), bytes per second (B/s), FLOPs and FLOP/s. Binary prefixes (KiB, MiB, GiB) are used for
// memory sizes because that is how GPU memory and caches are sized; bandwidths are decimal (GB/s, TB/s)
// because that is how vendors state them.

export const KiB = 1024;
export const MiB = 1024 ** 2;
export const GiB = 1024 ** 3;
export const GB = 1e9;
export const TB = 1e12;

/** Bytes per stored value for each numeric format the course discusses. */
export const BYTES_PER_VALUE = Object.freeze({
  fp32: 4,
  bf16: 2,
  fp16: 2,
  fp8: 1,
  int8: 1,
  int4: 0.5,
  nf4: 0.5,
});

/**
 * Model shapes the calculators offer. Each entry: layers, query heads, KV heads, head_dim, parameters.
 * Llama 3 figures are from Meta's model cards/configs; SmolLM2-135M's are copied from the GGUF the course engine
 * runs (inference_core.model.weights.load_config), its parameter count from ModelConfig.n_params(), and
 * tests/engine/test_course_demos.py checks them against that config.
 */
export const MODELS = Object.freeze({
  "smollm2-135m": { label: "SmolLM2-135M (the course model)", layers: 30, qHeads: 9, kvHeads: 3, headDim: 64, params: 134_515_008 },
  "llama-3-8b": { label: "Llama 3 8B", layers: 32, qHeads: 32, kvHeads: 8, headDim: 128, params: 8.03e9 },
  "llama-3-70b": { label: "Llama 3 70B", layers: 80, qHeads: 64, kvHeads: 8, headDim: 128, params: 70.6e9 },
});

/**
 * GPUs on the roofline and memory calculators: memory, bandwidth and dense BF16 tensor throughput from
 * NVIDIA's datasheets (SXM parts). Consumer cards carry no peak FLOP/s here (they appear only in the memory
 * calculator, where bandwidth is what matters).
 */
export const GPUS = Object.freeze({
  "rtx-3060": { label: "RTX 3060 12 GB", memoryGB: 12, bandwidth: 360 * GB, peakFlops: null },
  "rtx-4090": { label: "RTX 4090 24 GB", memoryGB: 24, bandwidth: 1008 * GB, peakFlops: null },
  "a100-80gb": { label: "A100 80 GB", memoryGB: 80, bandwidth: 2.0 * TB, peakFlops: 312e12 },
  "h100-sxm": { label: "H100 SXM 80 GB", memoryGB: 80, bandwidth: 3.35 * TB, peakFlops: 989e12 },
  "h200": { label: "H200 141 GB", memoryGB: 141, bandwidth: 4.8 * TB, peakFlops: 989e12 },
});

function bytesOf(precision) {
  const b = BYTES_PER_VALUE[precision];
  if (b === undefined) throw new RangeError(`unknown precision ${precision}`);
  return b;
}

function positive(name, value) {
  if (!(Number.isFinite(value) && value > 0)) throw new RangeError(`${name} must be a positive number, got ${value}`);
  return value;
}

// --- KV cache -------------------------------------------------------------------------------------

/** K and V for every layer and KV head: 2 × layers × kv_heads × head_dim × bytes per value. */
export function kvBytesPerToken({ layers, kvHeads, headDim, precision = "bf16" }) {
  return 2 * positive("layers", layers) * positive("kvHeads", kvHeads) * positive("headDim", headDim) * bytesOf(precision);
}

/** The whole cache: bytes per token × tokens × batch (every sequence keeps its own K/V). */
export function kvCacheBytes({ layers, kvHeads, headDim, precision = "bf16", tokens, batch = 1 }) {
  if (!(Number.isInteger(tokens) && tokens >= 0)) throw new RangeError(`tokens must be a whole number ≥ 0, got ${tokens}`);
  if (!(Number.isInteger(batch) && batch >= 1)) throw new RangeError(`batch must be a whole number ≥ 1, got ${batch}`);
  return kvBytesPerToken({ layers, kvHeads, headDim, precision }) * tokens * batch;
}

/**
 * The same model shape under three attention layouts. MHA: one K/V head per query head; GQA: the model's
 * own KV heads (groups of query heads share one); MQA: a single K/V head for all query heads.
 */
export function attentionVariants({ layers, qHeads, kvHeads, headDim }, precision = "bf16") {
  const variant = (name, heads) => ({
    name,
    kvHeads: heads,
    queriesPerKvHead: qHeads / heads,
    bytesPerToken: kvBytesPerToken({ layers, kvHeads: heads, headDim, precision }),
  });
  return [variant("MHA", qHeads), variant("GQA", kvHeads), variant("MQA", 1)];
}

// --- Weights, memory, decode ceiling -------------------------------------------------------------

/** Bytes to hold the weights: parameters × bytes per parameter. */
export function weightBytes(params, precision = "bf16") {
  return positive("params", params) * bytesOf(precision);
}

/**
 * Batch-1 decode ceiling: every generated token has to stream all weights (plus the KV cache) from memory
 * once, so tokens/s can be no higher than bandwidth / bytes read per token.
 */
export function decodeCeiling(bandwidthBytesPerS, bytesPerToken) {
  return positive("bandwidth", bandwidthBytesPerS) / positive("bytesPerToken", bytesPerToken);
}

/**
 * What one deployment needs: weights + KV cache (+ a fraction for activations and runtime overhead), how many
 * GPUs of `gpuMemoryGB` that takes, and the decode ceiling on those GPUs (weights split across them, so each
 * token reads weightBytes / nGpus from each GPU's memory in parallel; tensor-parallel communication ignored).
 */
export function memoryPlan({ params, precision = "bf16", kvBytesPerTokenValue = 0, tokens = 0, batch = 1,
  overhead = 0.1, gpuMemoryGB, bandwidth }) {
  const weights = weightBytes(params, precision);
  const kv = kvBytesPerTokenValue * tokens * batch;
  const total = (weights + kv) * (1 + overhead);
  const perGpu = positive("gpuMemoryGB", gpuMemoryGB) * GB;
  const nGpus = Math.max(1, Math.ceil(total / perGpu));
  const kvPerSequence = kvBytesPerTokenValue * tokens;
  // At batch 1 each step reads all weights and one sequence's KV cache.
  const bytesPerStep = weights + kvPerSequence;
  const ceiling = bandwidth ? decodeCeiling(bandwidth * nGpus, bytesPerStep) : null;
  return { weights, kv, total, nGpus, fitsOneGpu: nGpus === 1, decodeTokensPerS: ceiling };
}

// --- Roofline -------------------------------------------------------------------------------------

/** Arithmetic intensity: FLOPs done per byte moved to or from memory. */
export function arithmeticIntensity(flops, bytes) {
  return positive("flops", flops) / positive("bytes", bytes);
}

/** Roofline: attainable FLOP/s = min(peak compute, intensity × bandwidth). */
export function attainableFlops(intensity, peakFlops, bandwidth) {
  return Math.min(positive("peakFlops", peakFlops), positive("intensity", intensity) * positive("bandwidth", bandwidth));
}

/** The intensity at which a kernel stops being bandwidth-bound: peak FLOP/s ÷ bandwidth. */
export function ridgePoint(peakFlops, bandwidth) {
  return positive("peakFlops", peakFlops) / positive("bandwidth", bandwidth);
}

/**
 * Intensity of the weight matmuls in one forward of `tokens` tokens (batch × new tokens per sequence):
 * 2 FLOPs per parameter per token, each weight read once per forward → 2 × tokens / bytes per parameter.
 * Decode at batch 1 is tokens = 1; prefill of a 1,000-token prompt is tokens = 1,000.
 */
export function matmulIntensity(tokens, precision = "bf16") {
  return (2 * positive("tokens", tokens)) / bytesOf(precision);
}

// --- FlashAttention --------------------------------------------------------------------------------

/** Bytes of one materialized N×N score matrix (one head, one layer). */
export function scoreMatrixBytes(n, precision = "fp16") {
  return positive("n", n) * n * bytesOf(precision);
}

/** Bytes of one block of scores a tiled kernel keeps on chip: block_q × block_k values. */
export function scoreTileBytes(blockQ, blockK, precision = "fp32") {
  return positive("blockQ", blockQ) * positive("blockK", blockK) * bytesOf(precision);
}

// --- Serving metrics -----------------------------------------------------------------------------

/** TPOT: the time per output token after the first, (latency − TTFT) / (output tokens − 1). */
export function tpot(latencyS, ttftS, outputTokens) {
  if (outputTokens < 2) return 0;
  return (latencyS - ttftS) / (outputTokens - 1);
}

/** Goodput: requests per second that met both latency targets (TTFT and TPOT service-level objectives). */
export function goodput(requests, wallS, { ttftS, tpotS }) {
  const ok = requests.filter((r) => r.ttft <= ttftS && r.tpot <= tpotS).length;
  return ok / positive("wallS", wallS);
}

// --- Deployment chooser -------------------------------------------------------------------------

/**
 * The decision framework as rules: answers in, ranked recommendations out (each with its reason).
 * answers: { where: "cloud"|"own-gpus"|"laptop", traffic: "low"|"steady"|"high", latency: "interactive"|"batch",
 *            sharedPrefix: bool, quality: "max"|"balanced"|"cheap", modelGB: number, gpuMemoryGB: number }
 */
export function chooseDeployment(answers) {
  const recs = [];
  const add = (id, title, reason) => recs.push({ id, title, reason });
  const { where, traffic, latency, sharedPrefix, quality, modelGB, gpuMemoryGB } = answers;
  if (where === "laptop") {
    add("llama-cpp", "llama.cpp with a GGUF model", "Local and CPU inference: a single user, no server, quantized weights that fit in RAM.");
  } else if (traffic === "low") {
    add("hosted-api", "A hosted API (pay per token)", "At low traffic a dedicated GPU sits idle most of the time; paying per token is cheaper.");
  }
  if (where !== "laptop" && traffic !== "low") {
    if (sharedPrefix) {
      add("sglang", "SGLang", "Many requests share long prefixes (system prompts, agents, RAG): RadixAttention reuses their KV cache.");
    }
    add("vllm", "vLLM", "A general-purpose server: PagedAttention, continuous batching, an OpenAI-compatible API.");
    if (traffic === "high" && where === "own-gpus") {
      add("tensorrt-llm", "TensorRT-LLM", "Peak throughput on NVIDIA GPUs at steady high load, if you can afford the engine build step.");
    }
  }
  const precision = quality === "max" ? "BF16" : quality === "balanced" ? "FP8 or INT8" : "INT4 (AWQ or GPTQ)";
  add("precision", `Weights in ${precision}`, quality === "max"
    ? "Keep 16-bit weights when every point of quality matters."
    : "Decode is bandwidth-bound: fewer bytes per weight raise tokens/s and free memory for the KV cache.");
  if (latency === "interactive") {
    add("speculative", "Speculative decoding", "Interactive, low-batch traffic leaves compute idle; a draft model can use it to cut per-token latency.");
  } else {
    add("batching", "Large batches", "Offline work cares about throughput: batch widely and accept a longer time per token.");
  }
  if (modelGB && gpuMemoryGB && modelGB > gpuMemoryGB) {
    add("split", "Split across GPUs or quantize", `${modelGB} GB of weights do not fit in ${gpuMemoryGB} GB: use tensor parallelism or a smaller precision.`);
  }
  return recs;
}

// --- Formatting ------------------------------------------------------------------------------------

// Sizes in binary units: the one formatter cards and chart axes share (static/js/units.js).
export { formatBytes } from "../units.js";

/** Decimal rate or size: 3.35e12 → "3.35 TB", with an optional unit suffix ("/s"). */
export function formatDecimal(value, unit = "B", digits = 3) {
  const prefixes = ["", "k", "M", "G", "T", "P"];
  let v = value;
  let i = 0;
  while (Math.abs(v) >= 1000 && i < prefixes.length - 1) {
    v /= 1000;
    i += 1;
  }
  return `${Number(v.toPrecision(digits))} ${prefixes[i]}${unit}`;
}
