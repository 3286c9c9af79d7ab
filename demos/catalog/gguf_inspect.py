"""The GGUF demo: open the course model's own file, as llama.cpp and Ollama would, and read it back to the bytes.

A GGUF file is a header (magic, version, counts), metadata key/values (architecture, context length, tokenizer,
chat template…), one info record per tensor (name, shape, type, offset), padding to the alignment, then the tensor
data. The runner reads it with the `gguf` package, streams the header and selected metadata (`gguf_file`, with every
tensor's name, type and bytes for the picture), then walks the tensors one by one (`gguf_tensor`): shape, type,
bytes, bits per weight, and one block of 32 weights as stored (its scale, its min, its codes) beside the same
weights dequantized by hand and the values the engine actually holds for them (the loader's fp32 tensor, after
llama.cpp's rope permutation of Q/K rows is undone and Q/K/V, gate/up are concatenated into our fused matrices).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from inference_core import DEFAULT_MODEL
from inference_core.engine.trace import TraceEvent, event

from ..spec import DemoSpec, ParamSpec
from .runner import Models

BLOCK = 32  # weights in one block of the legacy quant types (Q4_0, Q4_1, Q8_0)
MAX_BLOCK = 17  # the smallest tensors (the norms' 576 weights) hold 18 blocks
# Metadata shown as it is stored (arrays by their length and first items): the keys the engine reads, and more.
SHOWN_KEYS = ("general.architecture", "general.name", "general.file_type", "general.quantization_version",
              "{arch}.context_length", "{arch}.embedding_length", "{arch}.block_count", "{arch}.feed_forward_length",
              "{arch}.attention.head_count", "{arch}.attention.head_count_kv", "{arch}.rope.freq_base",
              "tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
              "tokenizer.ggml.eos_token_id", "tokenizer.chat_template")
# Types a lesson compares (block size and bytes from the gguf package's own table, bits per weight computed).
COMPARED_TYPES = ("F32", "F16", "Q8_0", "Q6_K", "Q5_K", "Q4_1", "Q4_K", "Q4_0", "Q3_K", "Q2_K")
# GGUF tensor → the engine's tensor and where its rows sit: (our name, first row, rope heads or None); `{i}`: layer.
ENGINE_TENSORS = {"token_embd.weight": ("tok_embeddings.weight", 0, None), "output_norm.weight": ("norm.weight", 0, None),
                  "attn_q.weight": ("attention.wqkv.weight", 0, "q"), "attn_k.weight": ("attention.wqkv.weight", "q", "kv"),
                  "attn_v.weight": ("attention.wqkv.weight", "qk", None),
                  "ffn_gate.weight": ("feed_forward.w_gate_up.weight", 0, None),
                  "ffn_up.weight": ("feed_forward.w_gate_up.weight", "ffn", None)}


@event("gguf_file")
class GgufFile(TraceEvent):
    """The file: its header, selected metadata, and every tensor's name, type and bytes (the picture's bars)."""

    file_name: str
    file_bytes: int
    version: int
    n_metadata: int
    n_tensors: int
    data_offset: int  # header + metadata + tensor infos + alignment padding: where the tensor data starts
    alignment: int
    metadata: list[dict]  # {key, type, value} (an array: {key, type, length, first})
    tensors: list[dict]  # {name, type, n_bytes}, in file order
    types: list[dict]  # {type, tensors, n_elements, n_bytes, bits_per_weight}: this file's totals per type
    quant_types: list[dict]  # {type, block_size, type_bytes, bits_per_weight}: COMPARED_TYPES, computed


@event("gguf_tensor")
class GgufTensor(TraceEvent):
    """One tensor, and one block of its weights as stored, dequantized, and as the engine holds them."""

    index: int
    name: str
    shape: list[int]  # GGUF's order: the first dimension is the row length
    ggml_type: str  # Q4_1, Q8_0, F32…
    n_elements: int
    n_bytes: int
    offset: int  # in the file
    bits_per_weight: float
    block: int  # which block of 32 consecutive weights (row-major, as stored)
    row: int
    first_column: int
    scale: float | None  # d of a Q4_0/Q4_1/Q8_0 block (fp16 in the file); None for F32/F16
    min: float | None  # m of a Q4_1 block
    codes: list[int]  # the stored integers (4-bit 0…15, or int8); [] for F32/F16
    dequantized: list[float]  # d × q + m (Q4_1), d × (q − 8) (Q4_0), d × q (Q8_0), the value itself (F32/F16)
    engine_name: str  # the engine's tensor holding these weights
    engine_row: int
    engine_dtype: str
    engine: list[float]  # the engine's values for these 32 weights
    max_abs_diff: float  # |dequantized − engine|, 0 in fp32


def bits_per_weight(type_name: str) -> float:
    """Bits a weight costs in `type_name`, scales and mins included: block bytes × 8 ÷ weights per block."""
    import gguf

    block_size, type_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[type_name]]
    return type_bytes * 8 / block_size


def decode_block(type_name: str, raw: bytes) -> tuple[float | None, float | None, list[int], list[float]]:
    """One block's stored parts and its dequantized weights: (scale, min, codes, values)."""
    if type_name in ("F32", "F16"):
        values = np.frombuffer(raw, dtype=np.float32 if type_name == "F32" else np.float16)
        return None, None, [], [float(v) for v in values]
    d = float(np.frombuffer(raw[:2], dtype=np.float16)[0])
    if type_name == "Q8_0":
        codes = np.frombuffer(raw[2:34], dtype=np.int8).astype(np.int32)
        return d, None, codes.tolist(), [float(np.float32(d) * np.float32(q)) for q in codes]
    start = 4 if type_name == "Q4_1" else 2
    m = float(np.frombuffer(raw[2:4], dtype=np.float16)[0]) if type_name == "Q4_1" else None
    packed = np.frombuffer(raw[start:start + 16], dtype=np.uint8)
    codes = np.concatenate([packed & 0x0F, packed >> 4]).astype(np.int32)  # low nibbles: weights 0–15; high: 16–31
    if type_name == "Q4_1":
        return d, m, codes.tolist(), [float(np.float32(d) * np.float32(q) + np.float32(m)) for q in codes]
    if type_name == "Q4_0":
        return d, None, codes.tolist(), [float(np.float32(d) * np.float32(q - 8)) for q in codes]
    raise ValueError(f"the demo decodes F32, F16, Q4_0, Q4_1 and Q8_0 blocks, not {type_name}")


def engine_place(name: str, row: int, cfg) -> tuple[str, int]:
    """The engine's tensor for GGUF tensor `name` and the engine row holding GGUF row `row` (weights.read_gguf's map)."""
    from inference_core.model.weights import BLOCK_TENSORS, undo_rope_permute

    if not name.startswith("blk."):
        return ENGINE_TENSORS[name][0], row
    _, layer, rest = name.split(".", 2)
    prefix = f"layers.{layer}."
    for ours, theirs in BLOCK_TENSORS.items():
        if rest == theirs:
            return prefix + ours, row
    ours, first, rope = ENGINE_TENSORS[rest]
    q_rows, kv_rows = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    offset = {0: 0, "q": q_rows, "qk": q_rows + kv_rows, "ffn": cfg.ffn_dim}[first]
    if rope is not None:  # read_gguf undid llama.cpp's permutation: engine row e holds GGUF row order[e]
        heads = cfg.n_heads if rope == "q" else cfg.n_kv_heads
        order = undo_rope_permute(np.arange(heads * cfg.head_dim), heads)
        row = int(np.nonzero(order == row)[0][0])
    return prefix + ours, offset + row


def _value(field) -> dict:
    import gguf

    kind = field.types[0].name.lower()
    if field.types[0] == gguf.GGUFValueType.ARRAY:
        items = field.contents()
        return {"key": field.name, "type": f"array of {field.types[-1].name.lower()}", "length": len(items),
                "first": [str(x) for x in items[:5]]}
    value = field.contents()
    return {"key": field.name, "type": kind, "value": value if isinstance(value, (int, float, bool)) else str(value)}


def file_event(path, reader) -> dict:
    import gguf

    arch = str(reader.fields["general.architecture"].contents())
    per_type: dict[str, dict] = {}
    for t in reader.tensors:
        row = per_type.setdefault(t.tensor_type.name, {"type": t.tensor_type.name, "tensors": 0, "n_elements": 0,
                                                       "n_bytes": 0})
        row["tensors"] += 1
        row["n_elements"] += int(t.n_elements)
        row["n_bytes"] += int(t.n_bytes)
    for row in per_type.values():
        row["bits_per_weight"] = round(row["n_bytes"] * 8 / row["n_elements"], 4)
    keys = [k.format(arch=arch) for k in SHOWN_KEYS]
    return GgufFile(
        file_name=path.name, file_bytes=path.stat().st_size,
        version=int(reader.fields["GGUF.version"].contents()),
        n_metadata=int(reader.fields["GGUF.kv_count"].contents()), n_tensors=len(reader.tensors),
        data_offset=int(reader.data_offset), alignment=int(reader.alignment),
        metadata=[_value(reader.fields[k]) for k in keys if k in reader.fields],
        tensors=[{"name": t.name, "type": t.tensor_type.name, "n_bytes": int(t.n_bytes)} for t in reader.tensors],
        types=sorted(per_type.values(), key=lambda r: -r["n_bytes"]),
        quant_types=[{"type": name, "block_size": gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name]][0],
                      "type_bytes": gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name]][1],
                      "bits_per_weight": bits_per_weight(name)} for name in COMPARED_TYPES],
    ).to_dict()


def tensor_event(index: int, t, block: int, engine) -> dict:
    import gguf

    type_name = t.tensor_type.name
    block_size, type_bytes = gguf.GGML_QUANT_SIZES[t.tensor_type]
    per_block = BLOCK // block_size  # F32/F16 "blocks" are single values: read 32 of them
    raw = np.asarray(t.data).reshape(-1).view(np.uint8)
    start = block * per_block * type_bytes
    scale, minimum, codes, values = decode_block(type_name, raw[start:start + per_block * type_bytes].tobytes())
    row_length = int(t.shape[0])
    row, column = divmod(block * BLOCK, row_length)
    ours, engine_row = engine_place(t.name, row, engine.config)
    weights = dict(engine.model.named_parameters())[ours].detach()
    held = weights.reshape(-1) if weights.dim() == 1 else weights[engine_row]
    held = [float(v) for v in held[column:column + BLOCK].float().cpu()]
    return GgufTensor(
        index=index, name=t.name, shape=[int(d) for d in t.shape], ggml_type=type_name, n_elements=int(t.n_elements),
        n_bytes=int(t.n_bytes), offset=int(t.data_offset), bits_per_weight=bits_per_weight(type_name), block=block,
        row=row, first_column=column, scale=scale, min=minimum, codes=codes, dequantized=values, engine_name=ours,
        engine_row=engine_row, engine_dtype=str(weights.dtype).removeprefix("torch."), engine=held,
        max_abs_diff=max(abs(a - b) for a, b in zip(values, held)),
    ).to_dict()


def run(params: dict, should_stop: Callable[[], bool] | None = None, *, models: Models) -> Iterator[dict]:
    import gguf

    from inference_core.model.weights import MODELS, gguf_path

    params = SPEC.with_defaults(params)
    block, layers = int(params["block"]), int(params["layers"])
    if not 0 <= block <= MAX_BLOCK:
        raise ValueError(f"block must be in [0, {MAX_BLOCK}]")
    engine = models.get(DEFAULT_MODEL)
    if not 1 <= layers <= engine.config.n_layers:
        raise ValueError(f"layers must be in [1, {engine.config.n_layers}]")
    path = gguf_path(MODELS[DEFAULT_MODEL])
    reader = gguf.GGUFReader(str(path))
    yield file_event(path, reader)
    for index, t in enumerate(reader.tensors):
        if t.name.startswith("blk.") and int(t.name.split(".")[1]) >= layers:
            continue
        if should_stop is not None and should_stop():
            return
        yield tensor_event(index, t, block, engine)


SPEC = DemoSpec(
    name="gguf-inspect",
    title="Inside a GGUF file: the course model's own weights, block by block",
    description=(
        "Open the GGUF file this server's model ships as, read its header and metadata, then walk its tensors: each "
        "one's shape, type and bytes, and one block of 32 weights as stored (scale, min, 4-bit codes) beside the "
        "same weights dequantized and the values our engine holds for them."
    ),
    runner=run,
    module="js/demos/gguf-inspect.js",
    params={
        "layers": ParamSpec("int", default=2, label="Transformer layers to walk", min_value=1, max_value=30,
                            help="The embedding, the final norm and every tensor of the first N layers get a step; "
                                 "the picture shows the whole file."),
        "block": ParamSpec("int", default=0, label="Block of 32 weights shown", min_value=0, max_value=MAX_BLOCK),
    },
    presets=({"label": "The first two layers", "layers": 2, "block": 0},
             {"label": "Every layer", "layers": 30, "block": 5}),
    try_next=(
        "Set “Block of 32 weights shown” to 5 and step to blk.0.attn_q.weight: another 32 weights with their own "
        "scale and min, and the engine still holds exactly the values they decode to.",
        "Set “Transformer layers to walk” to 30 and step through: every layer repeats the same nine tensors in the "
        "same types, which is why the picture's bars repeat.",
    ),
)
