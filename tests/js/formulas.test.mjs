// Hand-worked checks of the calculator formulas. Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  GB, GiB, GPUS, KiB, MiB, MODELS, TB,
  arithmeticIntensity, attainableFlops, attentionVariants, chooseDeployment, decodeCeiling, formatBytes,
  formatDecimal, goodput, kvBytesPerToken, kvCacheBytes, matmulIntensity, memoryPlan, ridgePoint,
  scoreMatrixBytes, scoreTileBytes, tpot, weightBytes,
} from "../../static/js/calculators/formulas.js";

const close = (actual, expected, rel = 1e-9) =>
  assert.ok(Math.abs(actual - expected) <= rel * Math.abs(expected), `${actual} != ${expected}`);

test("Llama 3 8B: 2 × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B = 128 KiB per token in bf16", () => {
  const m = MODELS["llama-3-8b"];
  assert.equal(kvBytesPerToken({ ...m, precision: "bf16" }), 131_072);
  assert.equal(kvBytesPerToken({ ...m, precision: "bf16" }), 128 * KiB);
  assert.equal(formatBytes(131_072), "128 KiB");
});

test("Llama 3 8B at 4K tokens is 0.5 GiB, at 128K tokens 16 GiB", () => {
  const m = MODELS["llama-3-8b"];
  assert.equal(kvCacheBytes({ ...m, tokens: 4096 }), 0.5 * GiB);
  assert.equal(kvCacheBytes({ ...m, tokens: 131_072 }), 16 * GiB);
  assert.equal(kvCacheBytes({ ...m, tokens: 4096, batch: 8 }), 4 * GiB);
});

test("Llama 3 70B: 80 layers × 8 KV heads → 320 KiB per token, 10 GiB at 32K", () => {
  const m = MODELS["llama-3-70b"];
  assert.equal(kvBytesPerToken(m), 327_680);
  assert.equal(kvBytesPerToken(m), 320 * KiB);
  assert.equal(kvCacheBytes({ ...m, tokens: 32_768 }), 10 * GiB);
});

test("SmolLM2-135M: 30 layers × 3 KV heads × 64 in fp32 = 46,080 B per token", () => {
  const m = MODELS["smollm2-135m"];
  assert.equal(kvBytesPerToken({ ...m, precision: "fp32" }), 46_080);
  assert.equal(kvBytesPerToken({ ...m, precision: "bf16" }), 23_040);
});

test("MHA vs GQA vs MQA for Llama 3 8B: 512 KiB, 128 KiB, 16 KiB per token", () => {
  const [mha, gqa, mqa] = attentionVariants(MODELS["llama-3-8b"]);
  assert.deepEqual([mha.name, gqa.name, mqa.name], ["MHA", "GQA", "MQA"]);
  assert.deepEqual([mha.kvHeads, gqa.kvHeads, mqa.kvHeads], [32, 8, 1]);
  assert.deepEqual([mha.bytesPerToken, gqa.bytesPerToken, mqa.bytesPerToken], [512 * KiB, 128 * KiB, 16 * KiB]);
  assert.equal(gqa.queriesPerKvHead, 4);
  // The circulating "2.1 GB at 4K" for Llama 3 8B is the MHA figure (32 KV heads), in decimal gigabytes.
  assert.equal(mha.bytesPerToken * 4096, 2 * GiB);
  close(mha.bytesPerToken * 4096 / GB, 2.147483648);
});

test("the '2.5 MB per token' figure is 70B-class MHA (64 KV heads), not any GQA Llama 3", () => {
  const [mha, gqa] = attentionVariants(MODELS["llama-3-70b"]);
  assert.equal(mha.bytesPerToken, 2.5 * MiB);
  assert.equal(gqa.bytesPerToken * 8, mha.bytesPerToken);
  assert.equal(mha.bytesPerToken * 32_768, 80 * GiB); // ~80 GB per 32K-token request without GQA
});

test("weights per precision: 70B params → 280 / 140 / 70 / 35 GB", () => {
  assert.equal(weightBytes(70e9, "fp32") / GB, 280);
  assert.equal(weightBytes(70e9, "bf16") / GB, 140);
  assert.equal(weightBytes(70e9, "int8") / GB, 70);
  assert.equal(weightBytes(70e9, "int4") / GB, 35);
  assert.equal(weightBytes(MODELS["smollm2-135m"].params, "fp32"), 538_060_032);
  assert.throws(() => weightBytes(1e9, "int3"), RangeError);
});

test("decode ceiling = bandwidth / bytes per token", () => {
  assert.equal(decodeCeiling(2 * TB, 16 * GB), 125); // 8B-class bf16 on an A100
  close(decodeCeiling(3.35 * TB, 16.06e9), 208.59, 1e-4); // Llama 3 8B bf16 on an H100
  close(decodeCeiling(3.35 * TB, 35 * GB), 95.714, 1e-4); // 70B int4 on an H100
  // H100 vs A100: the bandwidth ratio alone is ~1.7×.
  close(decodeCeiling(GPUS["h100-sxm"].bandwidth, 1e9) / decodeCeiling(GPUS["a100-80gb"].bandwidth, 1e9), 1.675);
  assert.throws(() => decodeCeiling(0, 1), RangeError);
});

test("memory plan: Llama 3 70B bf16 needs two 80 GB GPUs, int4 fits one", () => {
  const m = MODELS["llama-3-70b"];
  const bf16 = memoryPlan({ params: 70e9, precision: "bf16", overhead: 0, gpuMemoryGB: 80, bandwidth: 3.35 * TB });
  assert.equal(bf16.weights, 140 * GB);
  assert.equal(bf16.nGpus, 2);
  assert.equal(bf16.fitsOneGpu, false);
  close(bf16.decodeTokensPerS, (2 * 3.35 * TB) / (140 * GB));
  const int4 = memoryPlan({
    params: 70e9, precision: "int4", kvBytesPerTokenValue: kvBytesPerToken(m), tokens: 32_768, batch: 1,
    overhead: 0, gpuMemoryGB: 80, bandwidth: 3.35 * TB,
  });
  assert.equal(int4.kv, 10 * GiB);
  assert.equal(int4.total, 35 * GB + 10 * GiB);
  assert.equal(int4.nGpus, 1);
  close(int4.decodeTokensPerS, (3.35 * TB) / (35 * GB + 10 * GiB));
});

test("roofline: ridge point, attainable FLOP/s, matmul intensity", () => {
  close(ridgePoint(989e12, 3.35 * TB), 295.22, 1e-4); // H100 bf16: ~295 FLOPs per byte
  assert.equal(ridgePoint(312e12, 2 * TB), 156);
  assert.equal(matmulIntensity(1, "bf16"), 1); // batch-1 decode: 2 FLOPs per 2-byte weight
  assert.equal(matmulIntensity(1, "fp32"), 0.5);
  assert.equal(matmulIntensity(512, "bf16"), 512);
  assert.equal(attainableFlops(1, 989e12, 3.35 * TB), 3.35e12); // bandwidth-bound
  assert.equal(attainableFlops(1000, 989e12, 3.35 * TB), 989e12); // compute-bound
  assert.equal(arithmeticIntensity(2e9, 1e9), 2);
});

test("FlashAttention: a 10K-token score matrix is 2×10^8 B in fp16, a 64×64 fp32 tile 16 KiB", () => {
  assert.equal(scoreMatrixBytes(10_000, "fp16"), 2e8);
  assert.equal(scoreTileBytes(64, 64, "fp32"), 16 * KiB);
});

test("serving metrics: TPOT and goodput", () => {
  close(tpot(2.5, 0.5, 101), 0.02);
  assert.equal(tpot(1, 1, 1), 0);
  const reqs = [{ ttft: 0.1, tpot: 0.02 }, { ttft: 0.9, tpot: 0.02 }, { ttft: 0.2, tpot: 0.08 }, { ttft: 0.3, tpot: 0.04 }];
  assert.equal(goodput(reqs, 2, { ttftS: 0.5, tpotS: 0.05 }), 1); // 2 of 4 requests met both targets in 2 s
});

test("deployment chooser follows the framework", () => {
  const ids = (a) => chooseDeployment(a).map((r) => r.id);
  assert.deepEqual(ids({ where: "laptop", traffic: "low", latency: "interactive", quality: "cheap" }),
    ["llama-cpp", "precision", "speculative"]);
  assert.ok(ids({ where: "cloud", traffic: "low", latency: "batch", quality: "max" }).includes("hosted-api"));
  const busy = ids({ where: "own-gpus", traffic: "high", latency: "batch", sharedPrefix: true, quality: "balanced" });
  assert.deepEqual(busy, ["sglang", "vllm", "tensorrt-llm", "precision", "batching"]);
  assert.ok(ids({ where: "cloud", traffic: "steady", latency: "batch", quality: "max", modelGB: 140, gpuMemoryGB: 80 }).includes("split"));
  for (const rec of chooseDeployment({ where: "cloud", traffic: "steady", latency: "interactive", quality: "balanced" })) {
    assert.ok(rec.reason.length > 20, `${rec.id} explains itself`);
  }
});

test("formatting", () => {
  assert.equal(formatBytes(0.5 * GiB), "512 MiB");
  assert.equal(formatBytes(46_080), "45 KiB");
  assert.equal(formatDecimal(3.35e12, "B/s"), "3.35 TB/s");
  assert.equal(formatDecimal(989e12, "FLOP/s"), "989 TFLOP/s");
});
