"""The gguf-inspect demo on the course model's own file: its totals are the file's, every block it shows is what the
engine holds for those weights, its bits per weight are computed from the block layouts, and its settings are checked.
The gguf-block exercise's expected weights are the gguf package's own dequantization of the same bytes."""
from __future__ import annotations

import gguf
import numpy as np
import pytest
import torch

from demos.catalog import gguf_inspect as gi
from demos.registry import DemoParamError, validate
from exercises.catalog import gguf_block
from inference_core import DEFAULT_MODEL
from inference_core.engine.trace import validate_event
from inference_core.model.weights import MODELS, gguf_path, undo_rope_permute

PATH = gguf_path(MODELS[DEFAULT_MODEL])


@pytest.fixture(scope="module")
def reader():
    return gguf.GGUFReader(str(PATH))


@pytest.fixture(scope="module")
def events(loaded_models):
    return list(gi.run(validate("gguf-inspect", {"layers": 1, "block": 3}), models=loaded_models))


def test_every_event_validates_and_the_walk_covers_the_first_layer(events, reader):
    for ev in events:
        validate_event(ev)
    assert events[0]["type"] == "gguf_file"
    walked = [e["name"] for e in events[1:]]
    expected = [t.name for t in reader.tensors if not t.name.startswith("blk.") or t.name.startswith("blk.0.")]
    assert walked == expected and len(walked) == 11  # embedding, final norm, 9 tensors of layer 0


def test_the_totals_are_the_file_s_size_less_its_header_and_metadata(events, reader):
    f = events[0]
    assert f["file_bytes"] == PATH.stat().st_size
    tensor_bytes = sum(t["n_bytes"] for t in f["tensors"])
    assert tensor_bytes == f["file_bytes"] - f["data_offset"] == sum(int(t.n_bytes) for t in reader.tensors)
    assert sum(row["n_bytes"] for row in f["types"]) == tensor_bytes
    assert f["n_tensors"] == len(reader.tensors) == len(f["tensors"])
    # The first tensor starts where the header, metadata and tensor infos end (after the alignment padding).
    assert events[1]["offset"] == f["data_offset"] and f["data_offset"] % f["alignment"] == 0
    keys = {m["key"]: m for m in f["metadata"]}
    assert keys["tokenizer.ggml.tokens"]["length"] == 49152 and keys["llama.context_length"]["value"] == 8192
    assert "{% for message in messages %}" in keys["tokenizer.chat_template"]["value"]


def test_each_block_is_the_gguf_package_s_dequantization_and_the_engine_s_own_values(events, reader):
    tensors = {t.name: t for t in reader.tensors}
    for ev in events[1:]:
        t = tensors[ev["name"]]
        flat = gguf.quants.dequantize(t.data, t.tensor_type).reshape(-1)
        start = ev["block"] * gi.BLOCK
        assert ev["dequantized"] == pytest.approx(flat[start:start + gi.BLOCK].tolist(), abs=0), ev["name"]
        assert ev["engine"] == pytest.approx(ev["dequantized"], abs=0 if ev["engine_dtype"] == "float32" else 1e-2)
        if ev["ggml_type"] == "Q4_1":
            assert all(0 <= q <= 15 for q in ev["codes"]) and len(ev["codes"]) == gi.BLOCK
            assert ev["dequantized"][0] == pytest.approx(ev["scale"] * ev["codes"][0] + ev["min"], rel=1e-6)


def test_a_rope_permuted_row_is_found_where_the_loader_put_it(loaded_models, reader):
    """llama.cpp's converter reorders Q/K rows; read_gguf undoes it: GGUF row r of attn_k is not our row r."""
    engine = loaded_models.get()
    cfg = engine.config
    t = next(t for t in reader.tensors if t.name == "blk.2.attn_k.weight")
    rows = gguf.quants.dequantize(t.data, t.tensor_type).reshape(cfg.n_kv_heads * cfg.head_dim, cfg.dim)
    wqkv = dict(engine.model.named_parameters())["layers.2.attention.wqkv.weight"]
    tolerance = 1e-6 if wqkv.dtype == torch.float32 else 1e-2  # a CUDA worker holds bf16
    wqkv = wqkv.float()
    moved = 0
    for gguf_row in (1, 2, 33, 100):
        name, row = gi.engine_place(t.name, gguf_row, cfg)
        assert name == "layers.2.attention.wqkv.weight" and cfg.n_heads * cfg.head_dim <= row
        assert wqkv[row].tolist() == pytest.approx(rows[gguf_row].tolist(), abs=tolerance)
        moved += row - cfg.n_heads * cfg.head_dim != gguf_row
    assert moved  # the permutation is real, and undone
    order = undo_rope_permute(np.arange(8), 1)
    assert order.tolist() == [0, 2, 4, 6, 1, 3, 5, 7]


def test_bits_per_weight_are_computed_from_the_block_layouts(events):
    table = {q["type"]: q for q in events[0]["quant_types"]}
    assert {k: table[k]["bits_per_weight"] for k in ("F32", "F16", "Q8_0", "Q4_1", "Q4_0", "Q4_K", "Q6_K")} == {
        "F32": 32, "F16": 16, "Q8_0": 8.5, "Q4_1": 5, "Q4_0": 4.5, "Q4_K": 4.5, "Q6_K": 6.5625}
    # Q4_0: an fp16 scale + 32 four-bit codes; Q4_K: 256 weights in 8 sub-blocks of 32, 6-bit scales and mins.
    assert table["Q4_0"]["type_bytes"] == 2 + 32 // 2 and table["Q4_K"]["type_bytes"] == 2 + 2 + 12 + 256 // 2
    for row in events[0]["types"]:  # this file's own totals per type
        assert row["bits_per_weight"] == gi.bits_per_weight(row["type"])


def test_decode_block_reads_q4_0_as_the_gguf_package_writes_it():
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(1, 32)
    raw = gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q4_0).reshape(-1).tobytes()
    scale, minimum, codes, values = gi.decode_block("Q4_0", raw)
    want = gguf.quants.dequantize(np.frombuffer(raw, np.uint8).reshape(1, -1), gguf.GGMLQuantizationType.Q4_0)
    assert values == want.reshape(-1).tolist() and minimum is None and max(codes) <= 15
    with pytest.raises(ValueError, match="not Q4_K"):
        gi.decode_block("Q4_K", bytes(144))


def test_the_exercise_s_expected_weights_are_the_gguf_package_s():
    for name, (type_name, raw) in gguf_block.BLOCKS.items():
        qtype = gguf.GGMLQuantizationType[type_name]
        want = gguf.quants.dequantize(np.array(raw, dtype=np.uint8).reshape(1, -1), qtype).reshape(-1).tolist()
        assert gguf_block.EXPECTED[name] == pytest.approx(want, rel=1e-6, abs=1e-9), name


@pytest.mark.parametrize("params, code", [
    ({"block": 18}, "param_out_of_range"), ({"block": -1}, "param_out_of_range"),
    ({"layers": 0}, "param_out_of_range"), ({"layers": 31}, "param_out_of_range"),
    ({"layers": "two"}, "invalid_param"), ({"tensor": "x"}, "unknown_param"),
])
def test_out_of_range_settings_are_refused_one_by_one(params, code):
    with pytest.raises(DemoParamError) as refused:
        validate("gguf-inspect", params)
    assert refused.value.code == code


def test_the_lesson_s_bits_per_weight_are_the_block_layouts_own():
    """Each worked figure in content/local-ecosystem.md, '(2 + 16) × 8 ÷ 32 = 4.5 bits', is the type's block."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "content" / "local-ecosystem.md").read_text()
    worked = re.findall(r"\*\*(Q\w+)\*\*: [^\n]*?\(([\d + ]+)\) × 8 ÷ (\d+) = ([\d.]+) bits", text)
    assert {w[0] for w in worked} == {"Q8_0", "Q4_0", "Q4_1"}
    for type_name, parts, block, bits in worked:
        block_size, type_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[type_name]]
        assert (sum(int(p) for p in parts.split("+")), int(block)) == (type_bytes, block_size), type_name
        assert float(bits) == gi.bits_per_weight(type_name)
    k_bytes, k_block, k_bits = re.search(r"(\d+) × 8 ÷ (\d+) = ([\d.]+) bits a weight, the cost of Q4_0", text).groups()
    assert (int(k_bytes), int(k_block)) == gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q4_K][::-1]
    assert float(k_bits) == gi.bits_per_weight("Q4_K") == gi.bits_per_weight("Q4_0")
    q6_bytes, q6_block, q6_bits = re.search(r"Q6_K spends (\d+) bytes on (\d+) weights, ([\d.]+) bits", text).groups()
    assert (int(q6_bytes), int(q6_block)) == gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q6_K][::-1]
    assert float(q6_bits) == gi.bits_per_weight("Q6_K")
