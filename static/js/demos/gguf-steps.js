// A gguf-inspect run (demos/catalog/gguf_inspect.py; docs/trace-schema/course-demos.md) as timeline steps, without
// the page (tested under node): one step for the file (`gguf_file`: header, metadata, where the tensor data starts),
// then one per tensor walked (`gguf_tensor`: its shape, type, bytes, and one block of 32 weights as stored beside the
// same weights dequantized and the engine's own values). Each caption is written from the step's own numbers.
//
//   const steps = ggufSteps();  for (const ev of events) { const step = steps.fromEvent(ev); … }

const KIB = 1024;
export const fmtBytes = (b) => (b >= KIB * KIB ? `${(b / KIB / KIB).toFixed(1)} MiB` : b >= KIB ? `${(b / KIB).toFixed(1)} KiB`
  : `${b} B`);
const grouped = (n) => Number(n).toLocaleString("en-US");
/** A weight as captions print it: 4 significant digits. */
export const fmtWeight = (x) => Number(x).toPrecision(4);
/** Bits per weight as captions print it: 5, 8.5, 32. */
export const fmtBits = (x) => String(Math.round(x * 100) / 100);

/** The metadata entry `key` (an array's length, or the value). */
export function meta(ev, key) {
  const found = ev.metadata.find((m) => m.key === key || m.key.endsWith(`.${key}`));
  if (!found) return null;
  return "length" in found ? found.length : found.value;
}

/** The step of a `gguf_file` event: what precedes the tensor data, and what the metadata carries. */
export function fileStep(ev) {
  const data = ev.file_bytes - ev.data_offset;
  const share = Math.round((100 * data) / ev.file_bytes);
  const arch = meta(ev, "general.architecture");
  return {
    kind: "file", ev, current: null,
    caption: `${ev.file_name}: GGUF version ${ev.version}, ${ev.n_metadata} metadata keys and ${ev.n_tensors} tensors. ` +
      `The header, metadata and tensor index take ${fmtBytes(ev.data_offset)}; the tensor data ${fmtBytes(data)} ` +
      `(${share}% of the file). The metadata names the architecture (${arch}), the context length ` +
      `(${grouped(meta(ev, "context_length"))} tokens), the tokenizer's ${grouped(meta(ev, "tokenizer.ggml.tokens"))} tokens ` +
      `and ${grouped(meta(ev, "tokenizer.ggml.merges"))} merges, and the chat template.`,
  };
}

/** How a block's weights come from its codes, in words, for `type`. */
function rule(ev) {
  const c0 = ev.codes[0];
  const w0 = fmtWeight(ev.dequantized[0]);
  if (ev.ggml_type === "Q4_1") {
    return `It stores a scale d = ${fmtWeight(ev.scale)} and a min m = ${fmtWeight(ev.min)} (fp16) and 32 codes from 0 to 15; ` +
      `weight = d × code + m, so the first code, ${c0}, gives ${w0}.`;
  }
  if (ev.ggml_type === "Q4_0") {
    return `It stores a scale d = ${fmtWeight(ev.scale)} (fp16) and 32 codes from 0 to 15; weight = d × (code − 8), ` +
      `so the first code, ${c0}, gives ${w0}.`;
  }
  if (ev.ggml_type === "Q8_0") {
    return `It stores a scale d = ${fmtWeight(ev.scale)} (fp16) and 32 signed 8-bit codes; weight = d × code, ` +
      `so the first code, ${c0}, gives ${w0}.`;
  }
  return `${ev.ggml_type} has no blocks: each weight is stored as it is, the first ${w0}.`;
}

/** The step of a `gguf_tensor` event. */
export function tensorStep(ev, file) {
  const same = ev.max_abs_diff === 0 ? "exactly the same 32 values"
    : `the same 32 values to within ${ev.max_abs_diff.toExponential(1)} (${ev.engine_dtype})`;
  const where = ev.engine_row === ev.row ? `row ${ev.engine_row}` : `row ${ev.engine_row} (GGUF row ${ev.row}, reordered)`;
  const of = file ? ` of ${file.n_tensors}` : "";
  return {
    kind: "tensor", ev, current: ev.index,
    caption: `Tensor ${ev.index + 1}${of}, ${ev.name}: ${ev.shape.join(" × ")} = ${grouped(ev.n_elements)} weights in ` +
      `${ev.ggml_type}, ${fmtBytes(ev.n_bytes)} at byte ${grouped(ev.offset)}, ${fmtBits(ev.bits_per_weight)} bits a weight. ` +
      `Block ${ev.block} holds row ${ev.row}, columns ${ev.first_column}–${ev.first_column + 31}. ${rule(ev)} ` +
      `Our engine's ${ev.engine_name}, ${where}, holds ${same}.`,
  };
}

/** A fresh converter for one run: fromEvent(ev) → a step or null. */
export function ggufSteps() {
  let file = null;
  return {
    fromEvent(ev) {
      if (!ev) return null;
      if (ev.type === "gguf_file") { file = ev; return { ...fileStep(ev), file }; }
      if (ev.type === "gguf_tensor") return { ...tensorStep(ev, file), file };
      return null;
    },
  };
}
