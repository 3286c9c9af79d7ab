"""oneDNN linears for long CPU steps (onednn_linears.py): the same linear up to summation order, taken only where
it applies, and a long prompt through the runner greedy-identical to transformers; the AMX paths (bf16 by choice,
w8a8's int8) forced on and off on this machine, a CPU without AMX simulated by INFERENCE_AMX=off. Forcing them on
needs a CPU where oneDNN runs the product exactly without AMX (FORCEABLE: AVX-512 for bf16, VNNI for int8): on
others (AMD Zen 3) those cases are skipped, and "on" is checked to fall back instead."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from inference_core import GenerationParams
from inference_core.engine.loaded_model import LoadedModel
from inference_core.kernels.onednn_linears import (FORCEABLE, KERNEL, KERNEL_BF16, MIN_ROWS, OneDnnLinears, amx,
                                                   available, cpu_flags, long_step_mode)
from inference_core.engine.model_runner import runner_for
from inference_core.kernels.fused_cpu import MAX_FUSED_POSITIONS
from inference_core.quant.linears import fake_quant_activations, quantize_linear
from inference_core.quant.quantize import quantize_model

pytestmark = pytest.mark.skipif(not available(), reason="this torch build has no oneDNN")


def forceable(kind: str) -> bool:
    return f"amx_{kind}" in cpu_flags() or FORCEABLE[kind] in cpu_flags()


needs_bf16 = pytest.mark.skipif(not forceable("bf16"), reason="oneDNN has no bf16 product on this CPU (no AVX-512)")
needs_int8 = pytest.mark.skipif(not forceable("int8"), reason="oneDNN's s8×s8 product saturates on this CPU (no VNNI)")
# A whole real prompt through the forced int8 product: with AVX-512 VNNI but no AMX tiles (an AMD EPYC with AVX-512,
# 2 cores) oneDNN's qlinear_pointwise took over 5 minutes for it, so the model-level check runs where AMX does.
needs_amx_int8 = pytest.mark.skipif("amx_int8" not in cpu_flags(),
                                    reason="a whole prompt on the forced int8 product takes minutes without AMX tiles")


def linear_in_mode(x, weight, bias=None) -> tuple[torch.Tensor, bool]:
    """F.linear inside the mode, and whether oneDNN's linear ran."""
    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU]) as prof, OneDnnLinears():
        out = F.linear(x, weight, bias)
    return out, any("_linear_pointwise" in e.name for e in prof.events())


@pytest.mark.parametrize("rows", [MIN_ROWS, 300])
@pytest.mark.parametrize("layout", ["row-major", "column-major"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_long_inputs_run_on_onednn_and_match_f_linear(rows, layout, with_bias):
    gen = torch.Generator().manual_seed(rows)
    x = torch.randn(1, rows, 576, generator=gen)
    weight = torch.randn(960, 576, generator=gen) / 24
    if layout == "column-major":  # model.store_wide_weights_column_major's layout: same shape, transposed strides
        weight = weight.t().contiguous().t()
    bias = torch.randn(960, generator=gen) if with_bias else None
    out, ran = linear_in_mode(x, weight, bias)
    assert ran
    assert out.shape == (1, rows, 960)
    torch.testing.assert_close(out, F.linear(x, weight, bias), atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("case", ["short", "bf16"])
def test_other_inputs_keep_f_linear_exactly(case):
    rows, dtype = (MIN_ROWS - 1, torch.float32) if case == "short" else (300, torch.bfloat16)
    x, weight = torch.randn(rows, 576, dtype=dtype), torch.randn(960, 576, dtype=dtype)
    out, ran = linear_in_mode(x, weight)
    assert not ran
    assert torch.equal(out, F.linear(x, weight))


@pytest.mark.model
def test_long_prompt_greedy_identical_to_transformers(engine, hf_model):
    ids = engine.tokenizer.encode(engine.tokenizer.chat_prompt(LONG_TEXT))
    assert len(ids) > MAX_FUSED_POSITIONS  # longer than the fused step takes in one call: the reference runs it
    runner = runner_for(engine.model)
    before = runner.path_counts[KERNEL]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        ours = engine.generate_ids(ids, GenerationParams(max_new_tokens=16))
    assert runner.path_counts[KERNEL] == before + 1  # the prefill, and only it
    assert any("_linear_pointwise" in e.name for e in prof.events())  # and its linears ran on oneDNN
    with torch.inference_mode():
        ref = hf_model.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False,
                                pad_token_id=engine.config.eos_token_id)
    assert ours == ref[0, len(ids):].tolist()


# longer than the fused step takes in one call (each repeat is ~20 tokens)
LONG_TEXT = ("Paged attention keeps the KV cache in fixed-size blocks, so memory is allocated as a sequence "
             "grows and freed the moment it ends. ") * (MAX_FUSED_POSITIONS // 20 + 2) + "In one sentence, why does this help batching?"


def ran(prof, name: str) -> bool:
    return any(name in e.name for e in prof.events())


def test_amx_follows_the_cpu_flags_unless_overridden(monkeypatch):
    monkeypatch.setenv("INFERENCE_AMX", "auto")
    assert amx("bf16") == ("amx_bf16" in cpu_flags()) and amx("int8") == ("amx_int8" in cpu_flags())
    monkeypatch.setenv("INFERENCE_AMX", "off")  # a CPU without AMX, simulated
    assert not amx("bf16") and not amx("int8")
    monkeypatch.setenv("INFERENCE_AMX", "on")  # forced where oneDNN can; elsewhere as auto (no AMX there)
    assert amx("bf16") == forceable("bf16") and amx("int8") == forceable("int8")
    monkeypatch.setattr("inference_core.kernels.onednn_linears.cpu_flags", lambda: frozenset({"avx2", "fma"}))
    assert not amx("bf16") and not amx("int8")  # an AVX2-only CPU (AMD Zen 3) is never forced
    monkeypatch.setenv("INFERENCE_AMX", "maybe")
    with pytest.raises(ValueError, match="INFERENCE_AMX"):
        amx("bf16")


@pytest.mark.parametrize("precision, amx_setting, kernel", [
    (None, "on", KERNEL),  # the default stays fp32 (token-identical to transformers) even with AMX
    pytest.param("bf16", "on", KERNEL_BF16, marks=needs_bf16),
    ("bf16", "off", KERNEL),  # asked for, but no AMX bf16: the step stays fp32 and says so
])
def test_long_steps_run_bf16_only_when_asked_for_and_amx_has_it(monkeypatch, precision, amx_setting, kernel):
    monkeypatch.setenv("INFERENCE_AMX", amx_setting)
    if precision:
        monkeypatch.setenv("INFERENCE_LONG_STEP_PRECISION", precision)
    else:
        monkeypatch.delenv("INFERENCE_LONG_STEP_PRECISION", raising=False)
    assert long_step_mode({}).kernel == kernel
    monkeypatch.setenv("INFERENCE_LONG_STEP_PRECISION", "fp16")
    with pytest.raises(ValueError, match="INFERENCE_LONG_STEP_PRECISION"):
        long_step_mode({})


@needs_bf16
def test_bf16_mode_multiplies_in_bf16_keeps_fp32_out_and_one_copy_per_weight():
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(200, 576, generator=gen)
    weight = torch.nn.Parameter(torch.randn(960, 576, generator=gen) / 24, requires_grad=False)
    bias = torch.randn(960, generator=gen)
    cache: dict = {}
    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU]) as prof, OneDnnLinears(cache):
        out = F.linear(x, weight, bias)
        again = F.linear(x, weight, bias)
    assert ran(prof, "_linear_pointwise") and out.dtype == torch.float32
    assert len(cache) == 1 and next(iter(cache.values()))[1].dtype == torch.bfloat16
    assert torch.equal(out, again)
    # bf16 inputs, fp32 accumulation, the product rounded to bf16 (within one bf16 step, 2^-7), the bias added in fp32
    want = F.linear(x.bfloat16().float(), weight.bfloat16().float())
    torch.testing.assert_close(out - bias, want, atol=1e-3, rtol=2 ** -7)


@pytest.mark.parametrize("amx_setting", [pytest.param("on", marks=needs_int8), "off"])
def test_w8a8_long_product_is_its_reference_on_amx_int8_or_without(monkeypatch, amx_setting):
    monkeypatch.setenv("INFERENCE_AMX", amx_setting)
    gen = torch.Generator().manual_seed(6)
    layer = quantize_linear(torch.randn(960, 576, generator=gen) / 24, "w8a8")
    x = torch.randn(MIN_ROWS + 36, 576, generator=gen) * 3
    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU]) as prof:
        out = layer(x)
    assert ran(prof, "qlinear_pointwise") == (amx_setting == "on")
    ref = F.linear(fake_quant_activations(x), layer.dequantize())  # its Python reference
    torch.testing.assert_close(out, ref, atol=1e-5 * ref.abs().max().item(), rtol=0)


@needs_bf16
@pytest.mark.model
def test_bf16_long_steps_pick_the_fp32_tokens_where_the_choice_is_clear(engine, monkeypatch):
    """bf16 is a precision choice: every prompt position whose fp32 top-two logits are more than 1.0 apart (bf16's
    ~3 significant digits move these logits by a few tenths) gets the same argmax; without AMX the step is fp32."""
    ids = engine.tokenizer.encode(engine.tokenizer.chat_prompt(LONG_TEXT))
    runner = runner_for(engine.model)
    logits = {}
    for precision, amx_setting in [("fp32", "on"), ("bf16", "on"), ("bf16", "off")]:
        monkeypatch.setenv("INFERENCE_LONG_STEP_PRECISION", precision)
        monkeypatch.setenv("INFERENCE_AMX", amx_setting)
        kernel = KERNEL_BF16 if (precision, amx_setting) == ("bf16", "on") else KERNEL
        before = runner.path_counts[kernel]
        logits[precision, amx_setting] = runner.forward_sequence(ids, runner.new_sequence(len(ids)), all_rows=True)
        assert runner.path_counts[kernel] == before + 1
    fp32, bf16 = logits["fp32", "on"], logits["bf16", "on"]
    assert torch.equal(logits["bf16", "off"], fp32)  # the fallback is the plain path
    assert not torch.equal(bf16, fp32)
    top = fp32.topk(2, dim=-1).values
    clear = (top[:, 0] - top[:, 1]) > 1.0
    assert clear.sum() >= 50  # not vacuous
    assert torch.equal(bf16.argmax(-1)[clear], fp32.argmax(-1)[clear])
    assert (bf16 - fp32).abs().max() < 1.0


@pytest.mark.model
def test_a_quantized_step_stays_on_the_fused_step_up_to_its_cap(engine):
    """Without AVX-512 a weight-only int8 step of up to MAX_FUSED_QUANTIZED_POSITIONS rows keeps the fused step's
    integer dot products (faster there than one dequantize + oneDNN); a longer one, or any of 64+ rows with
    AVX-512 (cap 0), takes oneDNN."""
    from inference_core.kernels.fused_cpu import MAX_FUSED_QUANTIZED_POSITIONS as cap

    runner = runner_for(quantize_model(engine.model, "int8"))
    if not runner._onednn:
        pytest.skip("no oneDNN: every quantized step runs fused")
    ids = engine.tokenizer.encode(LONG_TEXT)
    for n in sorted({MIN_ROWS, max(cap, MIN_ROWS), max(cap, MIN_ROWS) + 1}):
        before = runner.path_counts.copy()
        runner.forward_sequence(ids[:n], runner.new_sequence(n))
        assert set(runner.path_counts - before) == {runner.kernel if n <= cap else KERNEL}, n


@pytest.mark.model
@pytest.mark.parametrize("fmt", ["int8", "int4-g128"])
def test_quantized_long_prompt_runs_on_onednn_like_its_dequantized_reference(engine, fmt):
    """A weight-only model's long step: its reference (each weight dequantized once) with oneDNN's fp32 GEMM, no
    longer the fused step's per-row kernels (whose chunks of a prompt over 128 tokens crashed)."""
    from test_fused_cpu import dequantized_reference, new_cache, reference_logits

    qmodel = quantize_model(engine.model, fmt)
    ids = engine.tokenizer.encode(engine.tokenizer.chat_prompt(LONG_TEXT))
    assert len(ids) > MAX_FUSED_POSITIONS
    runner = runner_for(qmodel)
    got = runner.forward_sequence(ids, runner.new_sequence(len(ids) + 8), all_rows=True)
    assert runner.path_counts[KERNEL] == 1
    ref = reference_logits(dequantized_reference(qmodel, engine.model), ids, new_cache(qmodel, len(ids)))
    torch.testing.assert_close(got, ref, atol=2e-3, rtol=1e-3)
    assert got.argmax(-1).tolist() == ref.argmax(-1).tolist()
    out = LoadedModel(fmt, qmodel, engine.tokenizer, engine.device).generate_ids(ids, GenerationParams(max_new_tokens=4))
    assert len(out) == 4


@needs_amx_int8
@pytest.mark.model
def test_w8a8_long_prompt_on_amx_int8_computes_its_reference_per_layer(engine, monkeypatch):
    """Every projection of a real prompt's step agrees with the Python reference to fp32 rounding. The whole forward
    does not: rounding activations to 7 bits per row is a step function, and fp32-rounding differences flip codes
    that 30 layers amplify (logits move by several units at some positions, as they would for any summation order),
    so the model-level check is quality: the prompt's next-token loss and agreement with fp32 match the AMX-off path."""
    from inference_core.kernels.onednn_linears import w8a8_product
    from inference_core.quant.linears import W8A8DynamicLinear

    qmodel = quantize_model(engine.model, "w8a8")
    runner = runner_for(qmodel)
    ids = engine.tokenizer.encode(engine.tokenizer.chat_prompt(LONG_TEXT))
    errors = []

    def check(layer, inputs, _out):
        x2 = inputs[0].reshape(-1, layer.in_features).float()
        ref = F.linear(fake_quant_activations(x2), layer.dequantize())
        errors.append(float((w8a8_product(x2, layer) - ref).abs().max() / ref.abs().max()))

    hooks = [m.register_forward_hook(check) for m in qmodel.modules() if isinstance(m, W8A8DynamicLinear)]
    runner.forward_sequence(ids, runner.new_sequence(len(ids)))
    for h in hooks:
        h.remove()
    assert len(errors) == len(hooks) and max(errors) < 1e-5  # every projection
    logits = {}
    for amx_setting in ("on", "off"):
        monkeypatch.setenv("INFERENCE_AMX", amx_setting)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            logits[amx_setting] = runner.forward_sequence(ids, runner.new_sequence(len(ids)), all_rows=True)
        assert ran(prof, "qlinear_pointwise") == (amx_setting == "on")
    fp32 = runner_for(engine.model).forward_sequence(ids, runner_for(engine.model).new_sequence(len(ids)),
                                                     all_rows=True)
    nxt = torch.tensor(ids[1:])
    loss = {k: F.cross_entropy(v[:-1], nxt).item() for k, v in logits.items()}
    agree = {k: (v.argmax(-1) == fp32.argmax(-1)).float().mean().item() for k, v in logits.items()}
    assert abs(loss["on"] - loss["off"]) < 0.1, loss
    assert agree["on"] > 0.85 and abs(agree["on"] - agree["off"]) < 0.05, agree


@pytest.mark.parametrize("precision, amx_setting", [("fp32", "on"), pytest.param("bf16", "on", marks=needs_bf16),
                                                    ("bf16", "off")])
def test_a_step_the_fused_step_would_take_goes_to_amx_bf16_only_when_chosen(tiny_model, monkeypatch, precision,
                                                                            amx_setting):
    """64..MAX_FUSED_POSITIONS rows: the fused fp32 step's range, unless the step runs in bf16 on AMX."""
    from inference_core.engine.model_runner import ModelRunner

    monkeypatch.setenv("INFERENCE_LONG_STEP_PRECISION", precision)
    monkeypatch.setenv("INFERENCE_AMX", amx_setting)
    runner = ModelRunner(tiny_model)
    if runner.fused is None:
        pytest.skip(runner.fallback_reason)
    runner.forward_sequence(list(range(3, 3 + MIN_ROWS + 20)), runner.new_sequence(MIN_ROWS + 20))
    want = KERNEL_BF16 if (precision, amx_setting) == ("bf16", "on") else runner.fused.kernel
    assert list(runner.path_counts) == [want]
