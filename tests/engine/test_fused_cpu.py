"""The fused CPU step (quant_kernels/step.cpp via fused_cpu.py) against the reference forward of model/transformer.py.

fp32: logits within fp32 summation-order noise and greedy tokens identical (and, through the LoadedModel, identical to
transformers: test_model.py's greedy test now runs this path, asserted below). Quantized formats: against a
reference model holding the *dequantized* weights in plain nn.Linear layers, so no compiled code is shared.
"""
from __future__ import annotations

import copy
import re

import pytest
import torch
from torch import nn

from inference_core import GenerationParams
from inference_core.kernels import fused_cpu, quant_kernels
from bench.common import settings_override
from inference_core.model.config import engine_settings
from engine_reference import tiny_config
from inference_core.engine.loaded_model import LoadedModel
from inference_core.model.loader import build_model
from engine_reference import KVCache
from inference_core.engine.paged import PagedSequence
from inference_core.quant.linears import QuantizedLinear
from inference_core.quant.quantize import PROJECTIONS, quantize_model
from inference_core.engine.model_runner import ModelRunner, runner_for
from inference_core.engine.llm_engine import drive
from inference_core.model.sampling import SamplingParams
from inference_core.engine.scheduler import Request, SchedulerConfig

pytestmark = pytest.mark.skipif(quant_kernels.load(engine_settings()) is None, reason=f"no compiled kernels: {quant_kernels.why_unavailable(engine_settings())}")

PROMPT = "The KV cache stores keys and values so that each decode step"


def new_cache(model, capacity: int) -> KVCache:
    cfg = model.config
    return KVCache.allocate(cfg.n_layers, 1, cfg.n_kv_heads, capacity, cfg.head_dim, torch.float32, "cpu")


def reference_logits(model, tokens: list[int], cache: KVCache, n_layers: int | None = None) -> torch.Tensor:
    start = cache.length
    with torch.inference_mode():
        return model(torch.tensor([tokens]), torch.arange(start, start + len(tokens)), cache, n_layers=n_layers)[0]


def new_seq(model, capacity: int, n_layers: int | None = None) -> PagedSequence:
    """A sequence on blocks of its own pool (4-slot blocks: steps cross block boundaries)."""
    return runner_for(model).new_sequence(capacity, block_size=4, n_layers=n_layers)


def fused_logits(model, tokens: list[int], seq: PagedSequence, n_layers: int | None = None) -> torch.Tensor:
    """All rows' logits through the runner, asserting it took the fused step."""
    runner = runner_for(model)
    assert runner.fused is not None, runner.fallback_reason
    before = runner.path_counts[runner.kernel]
    out = runner.forward_sequence(tokens, seq, all_rows=True, n_layers=n_layers)
    assert runner.path_counts[runner.kernel] == before + 1
    return out


def contiguous_kv(seq: PagedSequence) -> tuple[torch.Tensor, torch.Tensor]:
    """The sequence's K and V as a contiguous cache lays them out: [layers, 1, kv_heads, length, head_dim]."""
    ids = torch.tensor(seq.table.blocks)
    return tuple(torch.stack([pool[layer][ids].transpose(0, 1).flatten(1, 2)[None, :, :seq.length]
                              for layer in range(pool.shape[0])]) for pool in (seq.pool.k, seq.pool.v))


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_tiny_model_prefill_chunks_and_steps_match_reference(qkv_bias):
    model = build_model(tiny_config(qkv_bias=qkv_bias), None, torch.device("cpu"))
    if qkv_bias:  # random non-zero biases (build_model draws them too, but make sure they matter)
        for block in model.layers:
            nn.init.normal_(block.attention.wqkv.bias, std=0.5)
    torch.manual_seed(3)
    tokens = torch.randint(0, model.config.vocab_size, (40,)).tolist()
    ref_cache, fused_cache = new_cache(model, 64), new_seq(model, 64)
    # chunks of 7, 1, 5 (a verify-sized step) and single tokens, at growing offsets
    for lo, hi in [(0, 7), (7, 8), (8, 13), (13, 14), (14, 30), (30, 31)]:
        ref = reference_logits(model, tokens[lo:hi], ref_cache)
        got = fused_logits(model, tokens[lo:hi], fused_cache)
        torch.testing.assert_close(got, ref, atol=2e-5, rtol=1e-4)
    assert fused_cache.length == ref_cache.length == 31
    k, v = contiguous_kv(fused_cache)
    torch.testing.assert_close(k, ref_cache.k[:, :, :, :31], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(v, ref_cache.v[:, :, :, :31], atol=1e-5, rtol=1e-5)


def test_the_longest_fused_step_matches_reference():
    """A prompt of MAX_FUSED_POSITIONS tokens runs as one fused call (each row's attention over up to that many
    keys, its scratch sized by it) and equals the reference's forward, K/V included."""
    n = fused_cpu.MAX_FUSED_POSITIONS
    model = build_model(tiny_config(max_seq_len=n), None, torch.device("cpu"))
    torch.manual_seed(7)
    tokens = torch.randint(0, model.config.vocab_size, (n,)).tolist()
    ref_cache, fused_cache = new_cache(model, n), new_seq(model, n)
    torch.testing.assert_close(fused_logits(model, tokens, fused_cache), reference_logits(model, tokens, ref_cache),
                               atol=5e-5, rtol=1e-4)
    k, v = contiguous_kv(fused_cache)
    torch.testing.assert_close(k, ref_cache.k[:, :, :, :n], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(v, ref_cache.v[:, :, :, :n], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("threads", [1, 3])
def test_vector_tails_match_reference(threads):
    """SiLU and softmax run eight values at a time: at 3 threads each thread's share of a 160-wide MLP (53 or 54
    values) and most key counts end in a partial vector, which takes the same code through a padded copy."""
    model = build_model(tiny_config(ffn_dim=160), None, torch.device("cpu"))
    for block in model.layers:  # gates spread over SiLU's whole range, both tails of e^-g included
        nn.init.normal_(block.feed_forward.w_gate_up.weight, std=1.0)
    torch.manual_seed(5)
    tokens = torch.randint(0, model.config.vocab_size, (23,)).tolist()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ref_cache, fused_cache = new_cache(model, 32), new_seq(model, 32)
        for lo, hi in [(0, 11), (11, 12), (12, 23)]:
            ref = reference_logits(model, tokens[lo:hi], ref_cache)
            got = fused_logits(model, tokens[lo:hi], fused_cache)
            torch.testing.assert_close(got, ref, atol=2e-5, rtol=1e-4)
    finally:
        torch.set_num_threads(before)


def test_early_exit_runs_only_the_first_layers(tiny_model):
    tokens = [3, 14, 15, 92, 65]
    cfg = tiny_model.config
    ref_cache = KVCache.allocate(1, 1, cfg.n_kv_heads, 16, cfg.head_dim, torch.float32, "cpu")
    fused_cache = new_seq(tiny_model, 16, n_layers=1)  # an early-exit draft's pool holds only its layers
    ref = reference_logits(tiny_model, tokens, ref_cache, n_layers=1)
    got = fused_logits(tiny_model, tokens, fused_cache, n_layers=1)
    torch.testing.assert_close(got, ref, atol=2e-5, rtol=1e-4)
    full = fused_logits(tiny_model, tokens, new_seq(tiny_model, 16))
    assert not torch.allclose(full, got, atol=1e-3)


@pytest.mark.parametrize("n_seqs", [7, 11, 32])
def test_a_rows_logits_do_not_depend_on_how_many_rows_share_the_step(tiny_model, n_seqs):
    """Batch kernels (fp32: two weight rows × three rows of x) sum every row in the order one row alone is
    summed: a batched step's logits are bit-identical to each sequence's own step."""
    from inference_core.engine.paged import PagedKVPool

    step = runner_for(tiny_model).fused
    cfg = tiny_model.config
    pool = PagedKVPool(cfg.n_layers, n_seqs, cfg.n_kv_heads, 16, cfg.head_dim)
    torch.manual_seed(5)
    prompts = [torch.randint(3, cfg.vocab_size, (3 + i % 9,)).tolist() for i in range(n_seqs)]
    tables = torch.arange(n_seqs).unsqueeze(1)  # sequence i owns block i
    for i, p in enumerate(prompts):
        step.forward_rows(torch.tensor(p), torch.arange(len(p)), torch.full((len(p),), i), tables, pool.k, pool.v,
                          torch.tensor([len(p) - 1]))
    tokens = torch.randint(3, cfg.vocab_size, (n_seqs,))
    positions, seq = torch.tensor([len(p) for p in prompts]), torch.arange(n_seqs)
    together = step.forward_rows(tokens, positions, seq, tables, pool.k, pool.v, torch.arange(n_seqs))
    alone = torch.cat([step.forward_rows(tokens[i:i + 1], positions[i:i + 1], seq[i:i + 1], tables, pool.k, pool.v,
                                         torch.tensor([0])) for i in range(n_seqs)])
    assert torch.equal(together, alone)


@pytest.mark.parametrize("n,k", [(37, 576), (229, 576), (20, 1536), (9, 96)])
def test_fp32_rows_are_summed_alike_whatever_shares_the_call(n, k):
    """fp32 projections over any number of rows (one-row blocks, f32_tile's blocks, a panel's odd last weight
    row, the rows after the last block) equal each row alone, bit for bit, and the product within fp32 noise."""
    kernels = quant_kernels.load(engine_settings())
    torch.manual_seed(n + k)
    w, bias, x = torch.randn(n, k), torch.randn(n), torch.randn(40, k)
    view = kernels.make_linear(0, w, None, bias, 0, None)
    alone = torch.cat([kernels.linear_forward(view, x[i:i + 1].contiguous(), "float") for i in range(40)])
    torch.testing.assert_close(alone, x @ w.T + bias, rtol=1e-5, atol=1e-4)
    for m in (*range(2, 15), 17, 33, 40):
        assert torch.equal(kernels.linear_forward(view, x[:m].contiguous(), "float"), alone[:m]), m


def test_every_header_the_kernels_include_keys_their_build():
    """The build directory is named by a hash of the sources and headers: a header left out of it (int_dot_avx2.h
    once was) would let an edited header load a stale build."""
    from inference_core.kernels.quant_kernels import _HEADERS, _SOURCES

    here = _SOURCES[0].parent
    included = {name for path in _SOURCES + _HEADERS
                for name in re.findall(r'^#include "([^"]+)"', path.read_text(), re.MULTILINE)}
    assert included and {here / name for name in included} <= set(_HEADERS)


def test_cache_overflow_is_a_clear_error(tiny_model):
    seq = new_seq(tiny_model, 4)
    assert seq.pool.capacity_tokens == 64  # lent pools come in size classes: at least 16 blocks (of 4 positions here)
    with pytest.raises(ValueError, match="sequence full: 65 positions > capacity 64"):
        fused_logits(tiny_model, [1] * 65, seq)
    assert seq.length == 0 and seq.table.blocks == []  # nothing written, nothing held


@pytest.mark.model
def test_engine_decodes_through_the_fused_step_token_identical_to_the_reference(engine):
    runner = runner_for(engine.model)
    assert runner.kernel == "cpu-fused-step fp32", runner.fallback_reason
    ids = engine.tokenizer.encode(PROMPT)
    params = GenerationParams(max_new_tokens=24, stop_at_eos=False)
    fast = engine.generate_ids(ids, params)
    cache = new_cache(engine.model, len(ids) + 24)
    seq, ref = list(ids), []
    with torch.inference_mode():
        feed = list(ids)
        for _ in range(24):
            logits = engine.model(torch.tensor([feed]), torch.arange(cache.length, cache.length + len(feed)), cache,
                                  last_only=True)[0, -1]
            ref.append(int(logits.argmax()))
            seq.append(ref[-1])
            feed = [ref[-1]]
    assert fast == ref


@pytest.mark.model
def test_verify_step_scores_every_position_like_the_reference(engine):
    ids = engine.tokenizer.encode(PROMPT)
    ref_cache, fused_cache = new_cache(engine.model, 64), new_seq(engine.model, 64)
    reference_logits(engine.model, ids, ref_cache)
    fused_logits(engine.model, ids, fused_cache)
    guesses = [ids[-1], 578, 1345, 260, 3094]  # k + 1 = 5 positions, as in a speculative round
    ref = reference_logits(engine.model, guesses, ref_cache)
    got = fused_logits(engine.model, guesses, fused_cache)
    torch.testing.assert_close(got, ref, atol=5e-4, rtol=1e-4)
    assert got.argmax(-1).tolist() == ref.argmax(-1).tolist()


def dequantized_reference(qmodel, base):
    """`base` with every projection and the head replaced by nn.Linear holding qmodel's dequantized weights."""
    ref = copy.deepcopy(base)
    for qblock, block in zip(qmodel.layers, ref.layers):
        for path in PROJECTIONS:
            parent, attr = path.split(".")
            q: QuantizedLinear = getattr(getattr(qblock, parent), attr)
            lin = nn.Linear(q.in_features, q.out_features, bias=False)
            lin.weight.data = q.dequantize().float().contiguous()
            setattr(getattr(block, parent), attr, lin)
    head = nn.Linear(qmodel.output.in_features, qmodel.output.out_features, bias=False)
    head.weight.data = qmodel.output.dequantize().float().contiguous()
    ref.output = head
    return ref


@pytest.mark.model
@pytest.mark.parametrize("fmt", ["int8", "fp8", "int4-g128", "int4-g32", "nf4"])
def test_quantized_formats_match_their_dequantized_reference(engine, fmt, one_thread):
    """The weight-only float kernels (int8/int4 forced off the integer-dot path, test_int_dot.py's)."""
    with settings_override(int_dot="float"):
        qmodel = quantize_model(engine.model, fmt)
        assert runner_for(qmodel).kernel == f"cpu-fused-step {fmt}"
    ref_model = dequantized_reference(qmodel, engine.model)
    ids = engine.tokenizer.encode(PROMPT)[:12]
    ref_cache, fused_cache = new_cache(ref_model, 40), new_seq(qmodel, 40)
    ref_tokens, fused_tokens = [], []
    ref_feed = fused_feed = ids
    for _ in range(12):
        ref = reference_logits(ref_model, ref_feed, ref_cache)[-1]
        got = fused_logits(qmodel, fused_feed, fused_cache)[-1]
        torch.testing.assert_close(got, ref, atol=2e-3, rtol=1e-3)
        ref_tokens.append(int(ref.argmax()))
        fused_tokens.append(int(got.argmax()))
        ref_feed, fused_feed = [ref_tokens[-1]], [fused_tokens[-1]]
    assert fused_tokens == ref_tokens


@pytest.mark.model
def test_formats_without_a_fused_kernel_fall_back_and_say_why(engine):
    w8a8 = quantize_model(engine.model, "w8a8")
    runner = ModelRunner(w8a8)
    assert runner.kernel == "torch reference"
    assert "w8a8" in runner.fallback_reason


def test_the_fast_path_can_be_switched_off(monkeypatch, tiny_model):
    from bench.common import settings_override
    from inference_core.model.config import EngineSettings

    assert EngineSettings.from_env({"INFERENCE_CPU_FASTPATH": "0"}).cpu_fastpath is False
    model = build_model(tiny_model.config, dict(tiny_model.state_dict()), torch.device("cpu"))  # not yet built
    with settings_override(cpu_fastpath=False):
        runner = ModelRunner(model)
    assert runner.kernel == "torch reference"
    assert "INFERENCE_CPU_FASTPATH=0" in runner.fallback_reason


@pytest.mark.parametrize("config", [
    SchedulerConfig(block_size=4, num_blocks=12),  # too small for every request: preempts and recomputes
    SchedulerConfig(block_size=4, num_blocks=40, prefix_caching=True),
], ids=["preempt", "prefix"])
def test_batched_steps_run_fused_over_the_paged_pool_and_match_single_requests(config):
    model = build_model(tiny_config(), None, torch.device("cpu"))
    engine = LoadedModel("tiny", model, None, torch.device("cpu"))
    fused = runner_for(model).fused
    calls = []
    native_rows = fused.forward_rows
    fused.forward_rows = lambda *a, **kw: calls.append(len(a[0])) or native_rows(*a, **kw)
    torch.manual_seed(5)
    prompts = [torch.randint(3, 97, (n,)).tolist() for n in (9, 23, 4, 17)]
    prompts += [prompts[1] + [5, 6, 7, 8, 9, 10], prompts[1] + [11, 12]]  # shared prefixes for the prefix cache
    reqs = [Request(f"r{i}", p, SamplingParams(max_new_tokens=7, stop_at_eos=False)) for i, p in enumerate(prompts)]
    sched, _ = drive(engine, reqs, config, arrival_steps={"r4": 3, "r5": 4})
    for i, prompt in enumerate(prompts):
        cache, feed, want = new_cache(model, len(prompt) + 7), prompt, []
        for _ in range(7):
            want.append(int(reference_logits(model, feed, cache)[-1].argmax()))
            feed = [want[-1]]
        assert sched.requests[f"r{i}"].output_ids == want, f"r{i}"
    # every step within the fused size ran fused (a recompute after preemption may exceed it), batches included
    sizes = [s["n_tokens"] for s in sched.step_stats]
    assert calls == [n for n in sizes if n <= fused_cpu.MAX_FUSED_POSITIONS] and max(calls) > 1
    if config.prefix_caching:
        assert sched.requests["r5"].num_cached_tokens > 0
    else:
        assert sched.num_preemptions > 0


@pytest.mark.model
def test_a_long_prompt_to_a_quantized_model_runs_as_fused_chunks(engine):
    qmodel = quantize_model(engine.model, "int8")
    with settings_override(int_dot="float"):  # the reference below multiplies exact activations
        runner = runner_for(qmodel)
    runner._onednn = False  # chunks run where torch has no oneDNN; with it, long steps take onednn_linears.py
    calls = []
    native_rows = runner.fused.forward_rows
    runner.fused.forward_rows = lambda tokens, *a, **kw: calls.append(len(tokens)) or native_rows(tokens, *a, **kw)
    ids = engine.tokenizer.encode(PROMPT * (fused_cpu.MAX_FUSED_POSITIONS // 12 + 1))
    assert len(ids) > fused_cpu.MAX_FUSED_POSITIONS
    chunked = runner.forward_sequence(ids, new_seq(qmodel, len(ids) + 1), all_rows=True)
    runner.fused.forward_rows = native_rows
    step = fused_cpu.MAX_FUSED_POSITIONS
    assert calls == [len(ids[i:i + step]) for i in range(0, len(ids), step)]
    whole = reference_logits(qmodel, ids, new_cache(qmodel, len(ids) + 1))
    torch.testing.assert_close(chunked, whole, atol=2e-3, rtol=1e-3)
    assert chunked.argmax(-1).tolist() == whole.argmax(-1).tolist()
    # The same prompt as a scheduled step over the paged pool: chunks that hold no sampled row only write K/V.
    qengine = LoadedModel("q", qmodel, engine.tokenizer, engine.device)
    rows = []
    native_rows = runner.fused.forward_rows
    runner.fused.forward_rows = lambda *a, **kw: rows.append(len(a[6])) or native_rows(*a, **kw)
    out = qengine.generate_ids(ids, GenerationParams(max_new_tokens=3, stop_at_eos=False))
    n_chunks = -(-len(ids) // step)
    assert rows[:n_chunks] == [0] * (n_chunks - 1) + [1]
    assert out[0] == whole[-1].argmax().item()


def test_single_sequence_generation_goes_through_the_runner_once_per_step(monkeypatch, tiny_model):
    """A single request is one-request schedule (ModelRunner.run once per token); a speculative request too (its
    prefill, then one verify per round), and its model draft calls ModelRunner.forward_sequence (a sequence on
    blocks of its own, rolled back after a rejection): no private forward anywhere."""
    from inference_core.speculative.drafts import ModelDraft
    from inference_core.speculative.decode import SpecParams
    from inference_core.speculative.speculate import speculate

    calls: list[int] = []
    runs: list[int] = []
    original, original_run = ModelRunner.forward_sequence, ModelRunner.run
    monkeypatch.setattr(ModelRunner, "forward_sequence",
                        lambda self, tokens, *a, **kw: calls.append(len(tokens)) or original(self, tokens, *a, **kw))
    monkeypatch.setattr(ModelRunner, "run", lambda self, batch, pool: runs.append(len(batch.tokens)) or original_run(self, batch, pool))
    from inference_core.model.weights import load_tokenizer

    engine = LoadedModel("tiny", tiny_model, load_tokenizer(), torch.device("cpu"))
    prompt = [5, 17, 23, 42, 8, 17, 23]
    out = [e for e in engine.generate_events(prompt, GenerationParams(max_new_tokens=6, stop_at_eos=False))
           if e.type == "token"]
    assert runs == [len(prompt)] + [1] * (len(out) - 1) and calls == []
    calls.clear()
    runs.clear()
    draft = ModelDraft(tiny_model, n_layers=1)
    events = list(speculate(engine, prompt, draft, SpecParams(k=3, max_new_tokens=8)))
    rounds = [e for e in events if e.type == "spec_round"]
    # the first round is the target's prefill (it drafts nothing), then one verify per round; the draft's own
    # forwards go through the runner too
    assert rounds[0].drafted == [] and runs == [len(prompt)] + [1 + len(e.drafted) for e in rounds[1:]]
    assert len(calls) == sum(e.n_draft_forwards for e in rounds)
