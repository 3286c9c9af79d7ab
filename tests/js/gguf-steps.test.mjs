// GGUF events → timeline steps: each caption is written from the numbers the picture and cards show.
import assert from "node:assert/strict";
import test from "node:test";

import { fmtBits, fmtBytes, ggufSteps, meta } from "../../static/js/demos/gguf-steps.js";

const file = { type: "gguf_file", file_name: "model.gguf", file_bytes: 98362432, version: 3, n_metadata: 33,
  n_tensors: 272, data_offset: 1785664, alignment: 32,
  metadata: [{ key: "general.architecture", type: "string", value: "llama" },
    { key: "llama.context_length", type: "uint32", value: 8192 },
    { key: "tokenizer.ggml.tokens", type: "array of string", length: 49152, first: [] },
    { key: "tokenizer.ggml.merges", type: "array of string", length: 48900, first: [] }],
  tensors: [], types: [], quant_types: [] };
const tensor = (over) => ({ type: "gguf_tensor", index: 8, name: "blk.0.attn_q.weight", shape: [576, 576],
  ggml_type: "Q4_1", n_elements: 331776, n_bytes: 207360, offset: 33806656, bits_per_weight: 5, block: 0, row: 0,
  first_column: 0, scale: 0.1268310546875, min: -0.73046875, codes: [5, 7], dequantized: [-0.0963, 0.1573],
  engine_name: "layers.0.attention.wqkv.weight", engine_row: 0, engine_dtype: "float32", engine: [-0.0963, 0.1573],
  max_abs_diff: 0, ...over });

test("file: what precedes the tensor data and what the metadata carries", () => {
  const step = ggufSteps().fromEvent(file);
  assert.equal(meta(file, "context_length"), 8192);
  assert.equal(step.caption, "model.gguf: GGUF version 3, 33 metadata keys and 272 tensors. The header, metadata and " +
    "tensor index take 1.7 MiB; the tensor data 92.1 MiB (98% of the file). The metadata names the architecture " +
    "(llama), the context length (8,192 tokens), the tokenizer's 49,152 tokens and 48,900 merges, and the chat template.");
});

test("tensor: a Q4_1 block's scale, min and first code give its first weight; the engine's row is named", () => {
  const steps = ggufSteps();
  steps.fromEvent(file);
  const step = steps.fromEvent(tensor());
  assert.equal(step.current, 8);
  assert.equal(step.caption, "Tensor 9 of 272, blk.0.attn_q.weight: 576 × 576 = 331,776 weights in Q4_1, 202.5 KiB " +
    "at byte 33,806,656, 5 bits a weight. Block 0 holds row 0, columns 0–31. It stores a scale d = 0.1268 and a min " +
    "m = -0.7305 (fp16) and 32 codes from 0 to 15; weight = d × code + m, so the first code, 5, gives -0.09630. " +
    "Our engine's layers.0.attention.wqkv.weight, row 0, holds exactly the same 32 values.");
});

test("tensor: Q8_0 and F32 blocks, a reordered row, and a bf16 engine's rounding", () => {
  const steps = ggufSteps();
  const q8 = steps.fromEvent(tensor({ ggml_type: "Q8_0", min: null, codes: [-42], bits_per_weight: 8.5, row: 3,
    engine_row: 96, max_abs_diff: 0.00049, engine_dtype: "bfloat16" }));
  assert.match(q8.caption, /, 8\.5 bits a weight\. .*32 signed 8-bit codes; weight = d × code, so the first code, -42,/);
  assert.match(q8.caption, /row 96 \(GGUF row 3, reordered\), holds the same 32 values to within 4\.9e-4 \(bfloat16\)\.$/);
  const f32 = steps.fromEvent(tensor({ ggml_type: "F32", scale: null, min: null, codes: [], bits_per_weight: 32 }));
  assert.match(f32.caption, /F32 has no blocks: each weight is stored as it is, the first -0\.09630\./);
  assert.equal(fmtBytes(2304), "2.3 KiB");
  assert.equal(fmtBits(4.5), "4.5");
  assert.equal(steps.fromEvent({ type: "token" }), null);
});
