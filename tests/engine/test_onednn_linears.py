"""oneDNN linears for long CPU steps (onednn_linears.py): the same linear up to summation order, taken only where
it applies, and a long prompt through the runner greedy-identical to transformers."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from inference_core import GenerationParams
from inference_core.kernels.onednn_linears import KERNEL, MIN_ROWS, OneDnnLinears, available
from inference_core.engine.model_runner import runner_for

pytestmark = pytest.mark.skipif(not available(), reason="this torch build has no oneDNN")


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
    text = ("Paged attention keeps the KV cache in fixed-size blocks, so memory is allocated as a sequence "
            "grows and freed the moment it ends. ") * 8 + "In one sentence, why does this help batching?"
    ids = engine.tokenizer.encode(engine.tokenizer.chat_prompt(text))
    assert len(ids) > 150  # longer than the fused step takes in one call: the reference runs it
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
