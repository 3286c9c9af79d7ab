"""Quantization: packing, round-trip error bounds, fast kernels == dequantize-then-matmul, real-model quality."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from inference_core.quant import formats, linears, quantize
from inference_core.kernels import quant_kernels
from inference_core.model.config import engine_settings

SHAPES = [(96, 576), (40, 1536), (33, 64)]  # K = 576 leaves a short last group for g128


def _w(n, k, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g) * 0.02
    w[0, 5] = 0.3  # one large weight per matrix, as real layers have
    return w


def test_nibble_pack_roundtrip_and_layout():
    codes = torch.randint(0, 16, (3, 64), dtype=torch.uint8)
    packed = formats.pack_nibbles(codes)
    assert packed.shape == (3, 32) and packed.dtype == torch.uint8
    assert torch.equal(formats.unpack_nibbles(packed), codes)
    # byte j of a 32-chunk: value j low, value j + 16 high
    assert packed[1, 3] == codes[1, 3] | (codes[1, 19] << 4)
    assert packed[2, 16 + 5] == codes[2, 32 + 5] | (codes[2, 32 + 21] << 4)


@pytest.mark.parametrize("n,k", SHAPES)
def test_int8_roundtrip_within_half_step(n, k):
    w = _w(n, k)
    q, s = formats.quantize_int8(w)
    assert q.dtype == torch.int8 and q.abs().max() <= 127
    err = (formats.dequantize_int8(q, s) - w).abs()
    assert (err <= s[:, None] / 2 + 1e-7).all()


@pytest.mark.parametrize("n,k", SHAPES)
@pytest.mark.parametrize("group", [32, 64, 128])
def test_int4_roundtrip_within_half_step(n, k, group):
    w = _w(n, k)
    p, s = formats.quantize_int4(w, group)
    assert p.shape == (n, k // 2) and s.shape == (n, -(-k // group))
    codes = formats.unpack_nibbles(p)
    assert codes.min() >= 1 and codes.max() <= 15  # symmetric: q + 8 ∈ [1, 15]
    step = s.repeat_interleave(group, dim=1)[:, :k]
    err = (formats.dequantize_int4(p, s, group) - w).abs()
    assert (err <= step / 2 + 1e-7).all()


@pytest.mark.parametrize("n,k", SHAPES)
def test_nf4_roundtrip_nearest_level(n, k):
    cb = formats.NF4_CODEBOOK
    # the codebook QLoRA/bitsandbytes ship, to 4 decimals
    assert torch.allclose(cb[[0, 1, 7, 8, 14, 15]], torch.tensor([-1.0, -0.6962, 0.0, 0.0796, 0.7230, 1.0]), atol=5e-4)
    w = _w(n, k)
    p, a = formats.quantize_nf4(w)
    deq = formats.dequantize_nf4(p, a)
    absmax = a.repeat_interleave(formats.NF4_BLOCK, dim=1)[:, :k]
    half_gap = (cb[1:] - cb[:-1]).max() / 2
    assert ((deq - w).abs() <= absmax * half_gap + 1e-7).all()
    # nearest level: no other level is closer
    normed = w / absmax
    best = (normed[..., None] - cb).abs().min(-1).values
    assert ((normed - deq / absmax).abs() <= best + 1e-6).all()


@pytest.mark.parametrize("n,k", SHAPES)
def test_fp8_roundtrip_relative_error(n, k):
    w = _w(n, k)
    q, s = formats.quantize_fp8(w)
    assert q.dtype == torch.float8_e4m3fn and q.element_size() == 1
    err = (formats.dequantize_fp8(q, s) - w).abs()
    # 3 mantissa bits: half an ulp is 2^-4 relative for normals; subnormals (below 2^-6) step by 2^-9
    bound = torch.maximum(w.abs() * 2.0**-4, s[:, None] * 2.0**-10)
    assert (err <= bound * (1 + 1e-6)).all()


def test_packed_bytes_are_real():
    w = _w(960, 576)
    sizes = {f: linears.quantize_linear(w, f).weight_bytes() for f in ["int8", "int4-g128", "int4-g32", "nf4", "fp8"]}
    n = w.numel()
    assert sizes["int8"] == n + 960 * 4
    assert sizes["fp8"] == n + 960 * 4
    assert sizes["int4-g128"] == n // 2 + 960 * 5 * 4  # 576 = 4·128 + 64 → 5 scales per row
    assert sizes["int4-g32"] == n // 2 + 960 * 18 * 4
    assert sizes["nf4"] == n // 2 + 960 * 9 * 4 + 16 * 4  # + the 16-entry codebook


FORMATS = ["int8", "int4-g32", "int4-g64", "int4-g128", "nf4", "fp8"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rows", [1, 3, 20])  # 1 and 3: GEMV kernels; 20: dequantize + GEMM
@pytest.mark.parametrize("n,k", SHAPES)
def test_quantized_linear_equals_dequantize_then_matmul(fmt, rows, n, k):
    layer = linears.quantize_linear(_w(n, k), fmt)
    x = torch.randn(rows, k)
    ref = x @ layer.dequantize().T
    y = layer(x)
    assert y.shape == (rows, n)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    # batched leading dims pass through
    assert torch.allclose(layer(x.view(1, rows, k)).view(rows, n), y, atol=1e-5)


def test_kernels_compiled_on_this_machine():
    """The machine has g++ and AVX2: the extension must build (otherwise the fast paths silently vanish)."""
    assert quant_kernels.load(engine_settings()) is not None, quant_kernels.why_unavailable(engine_settings())
    assert linears.quantize_linear(_w(8, 64), "nf4").kernel == "avx2-nf4-lut-gemv"
    assert linears.quantize_linear(_w(8, 64), "int4-g32").kernel == "avx2-int4-lut-gemv"


def test_a_build_lock_left_by_a_killed_build_does_not_hang_the_next_load():
    """torch's build lock is a plain file; a build killed mid-compile leaves it and later loads waited forever."""
    assert quant_kernels.load(engine_settings()) is not None, quant_kernels.why_unavailable(engine_settings())
    module_file = Path(quant_kernels.load(engine_settings()).__file__)
    (module_file.parent / "lock").write_text("")  # what a SIGKILLed build leaves behind
    probe = ("from inference_core.kernels import quant_kernels as q; from inference_core.model.config import "
             "engine_settings as e; print(q.load(e()) is not None, q.why_unavailable(e()))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.stdout.split()[0] == "True", out.stdout + out.stderr
    assert not (module_file.parent / "lock").exists()


def test_the_kernels_load_once_per_process_and_a_failed_build_is_not_retried(monkeypatch):
    """The compiled module is kept in the interpreter's module table (no module of ours holds it): every later
    load is that object. A build that fails is tried once; later loads answer None with its reason at once."""
    settings = engine_settings()
    first = quant_kernels.load(settings)
    assert first is not None and quant_kernels.load(settings) is first
    assert sys.modules[quant_kernels.COMPILED] is first

    builds = []

    def failing_build(cache_dir):
        builds.append(cache_dir)
        raise OSError("no compiler here")

    monkeypatch.delitem(sys.modules, quant_kernels.COMPILED)  # as in a fresh process (restored afterwards)
    monkeypatch.setattr(quant_kernels, "_build", failing_build)
    assert quant_kernels.load(settings) is None and quant_kernels.load(settings) is None
    assert quant_kernels.why_unavailable(settings) == "build failed: OSError: no compiler here"
    assert len(builds) == 1


def test_torch_fallback_matches_kernel(monkeypatch):
    w, x = _w(64, 576), torch.randn(1, 576)
    fast = {f: linears.quantize_linear(w, f)(x) for f in FORMATS}
    monkeypatch.setattr(linears, "_kernels", lambda: None)
    for f in FORMATS:
        layer = linears.quantize_linear(w, f)
        assert layer.kernel == "torch-dequant"
        torch.testing.assert_close(layer(x), fast[f], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 3])  # the AVX2 int8 GEMV path (rows <= GEMV_MAX_ROWS)
@pytest.mark.parametrize("outliers", [False, True])
def test_llm_int8_kernel_matches_torch_fallback(monkeypatch, rows, outliers):
    """LLM.int8 is left out of FORMATS: its AVX2 int8 GEMV path must equal its torch fallback too, with and
    without outlier columns (those go through the fp32 side product in both paths)."""
    w = _w(64, 576)
    x = torch.randn(rows, 576, generator=torch.Generator().manual_seed(rows))
    if outliers:
        x[:, 7] = 40.0
        x[0, 300] = -9.0  # an outlier in one row only still makes the whole column fp32
    layer = linears.quantize_linear(w, "llm-int8")
    assert layer.kernel == "avx2-int8-gemv+fp32-outliers"
    assert rows <= linears.GEMV_MAX_ROWS
    calls = {"n": 0}
    real = layer._gemv

    def counting(x2):
        calls["n"] += 1
        return real(x2)

    monkeypatch.setattr(layer, "_gemv", counting)
    fast = layer(x)
    assert calls["n"] == 1  # the kernel path really ran
    assert layer.outlier_counts[-1] == (2 if outliers else 0)
    monkeypatch.setattr(linears, "_kernels", lambda: None)
    fallback_layer = linears.quantize_linear(w, "llm-int8")
    assert fallback_layer.kernel == "torch-llm-int8"
    slow = fallback_layer(x)
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(layer(x), slow, rtol=1e-5, atol=1e-5)  # same layer, kernel now unavailable


def test_w8a8_matches_its_emulation_and_bounds():
    w, x = _w(192, 576), torch.randn(1, 576)
    layer = linears.quantize_linear(w, "w8a8")
    exact = F.linear(x, w)
    emulated = F.linear(linears.fake_quant_activations(x), layer.dequantize())
    y = layer(x)
    # FBGEMM rounds the same way up to ties; activations carry a 7-bit step, so compare to that scale
    assert (y - emulated).abs().max() < 1e-2 * exact.abs().max()
    assert (y - exact).abs().max() < 0.05 * exact.abs().max()


def test_llm_int8_keeps_outlier_columns_exact():
    w = _w(64, 576)
    x = torch.randn(4, 576)
    x[:, 7] = 40.0  # an outlier feature, as LLMs develop
    layer = linears.quantize_linear(w, "llm-int8")
    y = layer(x)
    assert list(layer.outlier_counts) == [1]
    # with the outlier in fp32 the error is that of int8 on the rest; without decomposition it is far larger
    ref = x @ layer.dequantize().T
    naive_sx = x.abs().amax(1, keepdim=True) / 127
    naive = (torch.round(x / naive_sx) * naive_sx) @ layer.dequantize().T
    assert (y - ref).abs().max() < 0.2 * (naive - ref).abs().max()


def test_parse_format_names():
    assert formats.parse_format("int4") == formats.parse_format("int4-g128")
    assert formats.parse_format("NF4").group == 64
    with pytest.raises(ValueError, match="unknown quantization format"):
        formats.parse_format("int3")


def test_quantize_model_copy_leaves_original(tiny_model):
    from inference_core.model.kv_cache import NoCache

    tokens = torch.tensor([[1, 5, 9, 3]])
    pos = torch.arange(4)
    ref = tiny_model(tokens, pos, NoCache())
    q = quantize.quantize_model(tiny_model, "int8")
    assert isinstance(q.output, linears.QuantizedLinear) and isinstance(q.layers[0].attention.wqkv, linears.PackedLinear)
    assert type(tiny_model.output) is torch.nn.Linear and tiny_model.output.weight is tiny_model.tok_embeddings.weight
    assert q.tok_embeddings.weight is tiny_model.tok_embeddings.weight  # shared, not copied
    torch.testing.assert_close(tiny_model(tokens, pos, NoCache()), ref)
    out = q(tokens, pos, NoCache())
    assert (out - ref).abs().max() < 0.05 * ref.abs().max()
    assert quantize.matmul_weight_bytes(q) < quantize.matmul_weight_bytes(tiny_model) / 3


# ------------------------------------------------------------------------------------- real SmolLM2
# Measured on the first 256 held-out tokens (one window), CPU fp32 reference, torch 2.13 (2026-11-22):
# perplexity vs fp32  int8 +0.34 %, int8 KV pool +0.11 %, nf4 +34 %, int4-g128 +91 %;
# mean KL (nats)      int8 0.0039, int8 KV 0.0006, nf4 0.35, int4-g128 0.86 (int8 KV re-measured 2026-11-26).
# Bounds below = measured + margin. Full-text figures: content/quantization.md, docs/lesson-records.md.


@pytest.fixture(scope="module")
def real_quality(engine):
    from inference_core.quant.perplexity import compare, heldout_ids, paged_backend

    models = {"fp32": engine.model, "kv-int8": engine.model}
    models.update({f: quantize.quantize_model(engine.model, f) for f in ["int8", "int4-g128", "nf4"]})
    kv = {"kv-int8": paged_backend(engine.model, "int8")}  # the engine's int8 KV pool, read by its attention
    stats = compare(models, engine.model, heldout_ids(engine.tokenizer, 256), window=256, backends=kv)
    return {k: v.to_dict() for k, v in stats.items()}


@pytest.mark.model
def test_real_model_perplexity_bounds(real_quality):
    base = real_quality["fp32"]["perplexity"]
    rel = {f: real_quality[f]["perplexity"] / base - 1 for f in real_quality}
    print({f: round(r, 4) for f, r in rel.items()}, {f: round(v["kl_vs_fp32"], 4) for f, v in real_quality.items()})
    assert 5 < base < 60
    assert abs(rel["int8"]) < 0.01  # issue goal: within 1 % — holds
    assert abs(rel["kv-int8"]) < 0.01
    # The 10 % goal for 4-bit does NOT hold on this 135M model re-quantized from Q4_1; the measured
    # figures (see the comment above) are the bounds, with a margin for run-to-run BLAS differences.
    assert rel["nf4"] < REAL_MODEL_BOUNDS["nf4"]
    assert rel["int4-g128"] < REAL_MODEL_BOUNDS["int4-g128"]
    # KL orders the formats the way bytes-per-weight and codebook fit predict
    kl = {f: real_quality[f]["kl_vs_fp32"] for f in real_quality}
    assert kl["fp32"] < 1e-6 < kl["int8"] < kl["nf4"] < kl["int4-g128"]


REAL_MODEL_BOUNDS = {"nf4": 0.50, "int4-g128": 1.20}


@pytest.mark.model
def test_generate_quant_cli_leaves_cached_engine_fp32(engine, capsys):
    import json

    from inference_core.__main__ import main

    assert main(["generate", "--prompt", "The capital of France is", "--max-new-tokens", "3", "--quant", "int8",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["token_ids"]) == 3 and "Paris" in out["text"]
    assert type(engine.model.output) is torch.nn.Linear  # the shared engine was not quantized in place


@pytest.mark.model
def test_quantization_demo_events_validate(engine, loaded_models):
    from demos.catalog.quantization import run
    from inference_core.engine.trace import validate_event

    events = list(run({"prompt": "The capital of France is", "format": "nf4", "layer": 2,
                       "projection": "wqkv", "max_new_tokens": 3}, models=loaded_models))
    for ev in events:
        validate_event(ev)
    types = [e["type"] for e in events]
    assert types[:2] == ["quant_layer", "quant_outliers"]
    assert types[-3:] == ["quant_summary", "comparison", "quant_formats"]
    assert types.count("quant_token") == 6
    layer = events[0]
    assert layer["shape"] == [960, 576] and layer["quant_bytes"] < layer["fp32_bytes"] / 6
    assert len(layer["grid"]) == 16 and sum(layer["hist_counts"]) == 960 * 576
    summary = events[-3]
    timing = events[-2]  # the interleaved decode steps (2 of 3 tokens) timed side by side, bytes read beside
    assert [s["label"] for s in timing["sides"]] == ["fp32", "nf4"] and timing["repeats"] == 2
    assert timing["sides"][1]["counters"]["weight bytes read per step"] == summary["quant_matmul_bytes"]
    assert summary["quant_matmul_bytes"] < summary["fp32_matmul_bytes"] / 6
    # Each format's tokens/s is its own steps' rate, the comparison's median step (the two generators alternate:
    # a wall-clock rate would count the other's steps and halve both).
    for side, key in zip(timing["sides"], ("fp32_decode_tokens_per_s", "quant_decode_tokens_per_s")):
        assert summary[key] == pytest.approx(1 / side["median_s"], rel=1e-9)
    assert events[-1]["rows"], "the recorded quantize-report table ships with the engine"


@pytest.mark.model
def test_source_projections_lie_on_a_q4_1_grid(engine):
    """The page's claim: the GGUF was Q4_1, so asymmetric 4-bit blocks of 32 reproduce the projections
    exactly, while symmetric int4-g32 (what we measure) does not."""
    w = engine.model.layers[10].feed_forward.w_down.weight.detach().float()
    g = w.reshape(w.shape[0], -1, 32)
    lo, hi = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
    step = (hi - lo) / 15
    asym = torch.round((g - lo) / step).clamp(0, 15) * step + lo
    assert (asym - g).abs().max() < 1e-6
    sym = formats.dequantize_int4(*formats.quantize_int4(w, 32), 32)
    assert (sym - w).pow(2).mean().sqrt() > 0.05 * w.pow(2).mean().sqrt()


@pytest.mark.parametrize("fmt", ["bnb-int8", "bnb-nf4"])
def test_bitsandbytes_formats_are_cuda_only_with_a_clear_error(fmt):
    from inference_core.quant.linears import quantize_linear

    with pytest.raises(ValueError, match="CUDA"):
        quantize_linear(torch.randn(64, 64), fmt)


@pytest.mark.parametrize("fmt", ["int8", "w8a8", "int4-g32", "nf4", "fp8", "llm-int8"])
def test_a_bias_is_kept_exact_and_added_after_the_product(fmt):
    """Qwen2's Q/K/V projections have biases: quantizing keeps them in fp32, counts their bytes, adds them."""
    from torch import nn

    from inference_core.quant.linears import quantize_linear

    torch.manual_seed(0)
    linear = nn.Linear(128, 96, bias=True)
    with torch.no_grad():
        linear.bias.mul_(10)
    q = quantize_linear(linear, fmt)
    plain = quantize_linear(linear.weight, fmt)
    x = torch.randn(3, 128)
    assert torch.equal(q.bias, linear.bias.detach())
    torch.testing.assert_close(q(x), plain(x) + linear.bias.detach(), rtol=0, atol=1e-5)
    assert q.weight_bytes() == plain.weight_bytes() + 96 * 4


def test_quantized_qwen_style_model_with_biases_runs_close_to_fp32():
    from engine_reference import tiny_config
    from inference_core.model.loader import build_model
    from inference_core.model.kv_cache import NoCache
    from inference_core.quant.quantize import quantize_model

    model = build_model(tiny_config(qkv_bias=True), None, torch.device("cpu"))
    with torch.no_grad():
        for layer in model.layers:
            layer.attention.wqkv.bias.normal_(0, 0.5)
    q = quantize_model(model, "int8")
    tokens = torch.tensor([[5, 17, 3, 42, 8]])
    with torch.inference_mode():
        ref = model(tokens, torch.arange(5), NoCache())
        out = q(tokens, torch.arange(5), NoCache())
    assert q.layers[0].attention.wqkv.bias is not None
    assert (out - ref).abs().max() < 0.05 * ref.abs().max()


def test_report_resident_bytes_count_fbgemm_prepacked_copy(tiny_model):
    """w8a8 holds its int8 weights twice: `qweight` (prefill, emulation) and FBGEMM's prepacked copy (decode)."""
    if not linears.fbgemm_available():
        pytest.skip("no FBGEMM on this machine: w8a8 emulates, and holds one copy")
    w8a8, int8 = quantize.quantize_model(tiny_model, "w8a8"), quantize.quantize_model(tiny_model, "int8")
    prepacked = sum(m.qweight.nbytes + 12 * m.out_features for m in linears.quantized_linears(w8a8).values())
    assert prepacked > 0 and all(m.prepacked_bytes() > 0 for m in linears.quantized_linears(w8a8).values())
    assert quantize.resident_bytes(w8a8) == quantize.resident_bytes(int8) + prepacked
    # weight-only formats hold nothing beside their buffers
    assert not any(hasattr(m, "prepacked_bytes") for m in linears.quantized_linears(int8).values())
    # a decode step still reads one copy
    assert quantize.matmul_weight_bytes(w8a8) == quantize.matmul_weight_bytes(int8)


def test_recorded_report_names_command_date_device_and_counts_the_prepacked_copy():
    import json
    import re

    from demos.catalog.quantization import MEASURED_PATH, recorded_formats

    data = json.loads(MEASURED_PATH.read_text())
    assert data["command"].startswith("python -m inference_core quantize-report")
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", data["date"]) and "CPU" in data["device"]
    source = recorded_formats().source  # what the demo's trade-off chart captions
    assert data["command"] in source and data["date"] in source and data["device"] in source
    rows = {r["format"]: r for r in data["rows"]}
    extra = rows["w8a8"]["resident_bytes"] - rows["int8"]["resident_bytes"]
    n_out = 30 * (960 + 576 + 3072 + 576) + 49152  # output channels of the quantized projections and head
    int8_values = rows["int8"]["matmul_weight_bytes"] - 4 * n_out  # minus the fp32 row scales
    assert extra == int8_values + 12 * n_out  # ~135 MB: the prepacked copy of the same int8 values


@pytest.mark.parametrize("fmt", ["int8", "w8a8", "int4-g32", "nf4", "fp8", "llm-int8"])
@pytest.mark.parametrize("rows", [1, 20])
def test_bf16_activations_stay_bf16(fmt, rows):
    """bf16 is the default on CUDA: a quantized linear takes bf16 activations and returns bf16 (the K/V it
    feeds go into a bf16 pool), the same product as in fp32 up to bf16 rounding."""
    from inference_core.quant.linears import quantize_linear

    q = quantize_linear(_w(96, 576, seed=2), fmt)
    x = torch.randn(rows, 576, generator=torch.Generator().manual_seed(3))
    y = q(x.bfloat16())
    assert y.dtype == torch.bfloat16 and y.shape == (rows, 96)
    torch.testing.assert_close(y.float(), q(x.bfloat16().float()), rtol=2e-2, atol=2e-2)
