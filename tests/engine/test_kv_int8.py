"""The int8 KV pool (engine/paged.py, `kv_dtype="int8"`): storage, capacity, and generation that really reads it.

Every path that reads the pool is checked over an int8 pool: the fused C++ step (the path a CPU engine with int8
KV takes) against the runner's torch reference step, token for token and page for page; the step graphs' torch
gather forced on the CPU, and the Triton paged-decode kernel in its interpreter, against that reference.
Generation is checked by the pool it ran on (its dtype and its scales) and the path the runner counted, never by
its output alone.
"""
from __future__ import annotations

import copy
import os

import pytest
import torch

from inference_core.engine.llm_engine import drive
from inference_core.engine.loaded_model import GenerationParams, LoadedModel
from inference_core.engine.model_runner import ModelRunner, runner_for
from inference_core.engine.paged import PagedKVPool, SeqSlice, dequantize, pool_bytes_per_token, quantize_rows
from inference_core.engine.request import StepRows
from inference_core.engine.scheduler import Request, SchedulerConfig
from inference_core.kernels import quant_kernels
from inference_core.model.config import engine_settings
from inference_core.kernels.paged_graphs import StepGraphs
from engine_reference import tiny_config
from inference_core.model.loader import build_model

if not torch.cuda.is_available():  # Triton decides at import whether kernels run in its CPU interpreter
    os.environ.setdefault("TRITON_INTERPRET", "1")

# SmolLM2-135M's KV shape (30 layers, 3 kv heads, head_dim 64): int8 + an fp16 scale is 66 bytes per head vector
SMOL = dict(n_layers=30, n_kv_heads=3, head_dim=64)


needs_kernels = pytest.mark.skipif(quant_kernels.load(engine_settings()) is None,
                                   reason=f"no compiled kernels: {quant_kernels.why_unavailable(engine_settings())}")


def int8_path(model) -> str:
    """The path the runner names for an int8 pool's steps: the fused step's where it has one."""
    return f"{runner_for(model).kernel} (int8 KV)"


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return build_model(tiny_config(max_seq_len=128), None, torch.device("cpu"))


def test_quantize_rows_error_is_half_a_step_of_the_stored_scale():
    x = torch.randn(4, 3, 64) * torch.tensor([0.01, 1.0, 300.0]).view(1, 3, 1)
    q, scale = quantize_rows(x)
    assert q.dtype == torch.int8 and scale.dtype == torch.float16 and scale.shape == (4, 3)
    err = (dequantize(q, scale, torch.float32) - x).abs()
    assert (err <= scale.float().unsqueeze(-1) / 2 + 1e-6).all()
    assert q.abs().max() == 127  # absmax scaling uses the whole range


def test_int8_pool_bytes_halve_bf16_and_quarter_fp32_with_scales_counted():
    per = {name: pool_bytes_per_token(**SMOL, dtype=dt, kv_dtype=kv)
           for name, dt, kv in [("fp32", torch.float32, "auto"), ("bf16", torch.bfloat16, "auto"),
                                ("int8", torch.float32, "int8")]}
    assert per == {"fp32": 46_080, "bf16": 23_040, "int8": 2 * 30 * 3 * (64 + 2)}  # 11,880
    # capacity per byte: 2·64/66 = 1.94× bf16's, 4·64/66 = 3.88× fp32's (the scales cost 2 of every 66 bytes)
    assert per["bf16"] / per["int8"] == pytest.approx(1.94, abs=0.01)
    assert per["fp32"] / per["int8"] == pytest.approx(3.88, abs=0.01)
    pool = PagedKVPool(SMOL["n_layers"], 8, SMOL["n_kv_heads"], 16, SMOL["head_dim"], kv_dtype="int8")
    assert pool.k.dtype == pool.v.dtype == torch.int8 and pool.k_scale.shape == pool.k.shape[:-1]
    assert pool.bytes_per_token() == per["int8"] and pool.nbytes() == 8 * 16 * per["int8"]
    with pytest.raises(ValueError, match="kv_dtype"):
        SchedulerConfig(kv_dtype="int4")


def run_engine(model, prompts, kv_dtype, **config):
    """Greedy tokens of `prompts` through the scheduler, and what every forward saw: (pool dtype, scales set)."""
    runner = runner_for(model)
    seen = []
    forward = runner.forward_batch

    def spy(step, pool, n_layers=None):
        out = forward(step, pool, n_layers)
        seen.append((pool.k.dtype, pool.quantized and bool(pool.k_scale.any())))
        return out

    runner.forward_batch = spy
    try:
        params = GenerationParams(max_new_tokens=6, stop_at_eos=False)
        reqs = [Request(f"r{i}", p, params) for i, p in enumerate(prompts)]
        sched, _ = drive(LoadedModel("tiny", model, None, model.tok_embeddings.weight.device), reqs,
                         SchedulerConfig(block_size=4, num_blocks=64, kv_dtype=kv_dtype, **config), trace=False)
    finally:
        del runner.forward_batch
    run_engine.last = sched
    return [sched.requests[f"r{i}"].output_ids for i in range(len(prompts))], seen


def test_generation_reads_and_writes_an_int8_pool(model):
    prompts = [[3, 17, 42, 5, 9, 11, 20], [8, 8, 30, 2 + 1, 60], [50, 51, 52, 53, 54, 55, 56, 57, 58]]
    before = runner_for(model).path_counts.copy()
    tokens, seen = run_engine(model, prompts, "int8")
    assert seen and all(dtype == torch.int8 and scaled for dtype, scaled in seen)
    assert runner_for(model).path_counts[int8_path(model)] - before[int8_path(model)] == len(seen)
    ref, seen_ref = run_engine(model, prompts, "auto")
    assert all(dtype == torch.float32 for dtype, _ in seen_ref)
    # random weights: greedy argmaxes are close calls, so only most tokens need agree (SmolLM2's figure is below)
    agree = sum(a == b for x, y in zip(tokens, ref) for a, b in zip(x, y)) / sum(map(len, ref))
    assert agree >= 0.6, (tokens, ref)


def test_prefix_cache_hits_carry_their_scales(model):
    shared = [3, 17, 42, 5, 9, 11, 20, 7, 30, 31, 32, 33]  # three full blocks of 4
    prompts = [shared + [40, 41], shared + [44]]
    cached, _ = run_engine(model, prompts, "int8", prefix_caching=True, max_num_seqs=1)
    assert run_engine.last.requests["r1"].num_cached_tokens == len(shared)
    plain, _ = run_engine(model, prompts, "int8")
    assert cached == plain  # the hit reads the same int8 blocks and scales a recomputation would write


def prefilled_int8(model, lengths, fused=True):
    """A runner (with its fused step, or `fused=False`: the torch reference only) and an int8 pool of 4-slot
    blocks holding a prefill of each length, one sequence each; their block tables have room for a decode token."""
    runner = ModelRunner(model)
    if not fused:
        runner.fused = None
    pool = runner.new_kv_pool(32, 4, kv_dtype="int8")
    gen = torch.Generator().manual_seed(1)
    tables, free = [], iter(range(32))
    for n in lengths:
        t = [next(free) for _ in range(n // 4 + 1)]  # + room for the decode token
        tokens = torch.randint(3, model.config.vocab_size, (n,), generator=gen).tolist()
        runner.forward_batch(StepRows(tokens, list(range(n)), [0] * n, [n - 1], [SeqSlice(0, n, n, t)]), pool)
        tables.append(t)
    return runner, pool, tables


@pytest.mark.parametrize("use_triton", [False, True], ids=["torch-gather", "triton-interpreted"])
def test_step_graph_paths_dequantize_on_read(model, use_triton):
    if use_triton:
        pytest.importorskip("triton")
        if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
            model = copy.deepcopy(model).to("cuda")  # compiled Triton reads CUDA memory only
    lengths = [5, 13, 9]
    runner, pool, tables = prefilled_int8(model, lengths, fused=False)
    step = StepRows([7, 8, 9], lengths, [0, 1, 2], [0, 1, 2],
                    [SeqSlice(i, 1, n + 1, t) for i, (n, t) in enumerate(zip(lengths, tables))])
    ref_pool = copy.copy(pool)  # the same pages and scales, in tensors of its own
    for name in ("k", "v", "k_scale", "v_scale"):
        setattr(ref_pool, name, getattr(pool, name).clone())
    ref = runner.forward_batch(step, ref_pool)  # the reference PagedBackend over the same int8 pages
    graphs = StepGraphs(model, pool, capture=False, use_triton=use_triton)
    assert "int8 KV" in graphs.kernel
    got = graphs.run(step)
    torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4)
    # The same new token rounded to the same int8 and scale by both paths. On a GPU the two paths' projections run
    # other matmul kernels (a bucket's rows vs the reference's), so a value on a rounding edge may land one step
    # away (seen on an H100); on the CPU they are bit-identical.
    steps = 0 if pool.k.device.type == "cpu" else 1
    for a, b in [(pool.k, ref_pool.k), (pool.v, ref_pool.v)]:
        assert (a.int() - b.int()).abs().max().item() <= steps
    torch.testing.assert_close(pool.k_scale, ref_pool.k_scale, atol=0 if steps == 0 else 1e-3, rtol=0 if steps == 0 else 1e-2)


@needs_kernels
def test_fused_step_quantizes_new_kv_as_the_pool_does_bit_for_bit():
    """The fused step's quantizer (the one it writes new K/V with) against `quantize_rows`, on rows of every scale:
    zero rows and tiny ones (the 2^-24 floor), huge ones (the fp16 ceiling, values clamped to ±127), and exact
    halves of the scale, which round to even."""
    gen = torch.Generator().manual_seed(2)
    steps = torch.tensor([0.5, 0.25, 1 / 64, 3.0, 2.0 ** -14]).unsqueeze(1)
    ties = torch.cat([torch.arange(-63, 63).float()[::2] + 0.5, torch.arange(0, 32).float() + 0.5])[:63]
    rows = [
        torch.randn(4000, 64, generator=gen) * torch.logspace(-9, 5, 4000).unsqueeze(1),
        torch.zeros(2, 64), torch.randn(50, 64, generator=gen) * 1e-9, torch.randn(50, 64, generator=gen) * 1e7,
        torch.cat([ties.expand(5, -1), torch.full((5, 1), 127.0)], dim=1) * steps,  # absmax 127 steps: scale = step
    ]
    native = quant_kernels.load(engine_settings())
    for x in rows:
        want_q, want_scale = quantize_rows(x)
        got_q, got_scale = native.quantize_kv_rows(x.contiguous())
        assert torch.equal(got_q, want_q)
        assert torch.equal(got_scale.view(torch.int16), want_scale.view(torch.int16))  # bit for bit, ±0 apart


@needs_kernels
@pytest.mark.parametrize("threads", [1, 3])
def test_fused_step_over_int8_pages_matches_the_torch_step_page_for_page(model, threads):
    """Prefills crossing block boundaries, then batched decode steps and a verify-sized step, through the fused
    step over one int8 pool and the torch reference over another: the same logits up to fp32 summation order, the
    same greedy tokens, and bit-identical int8 pages and scales."""
    lengths = [5, 13, 9]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        (fused, fused_pool, tables), (ref, ref_pool, _) = (prefilled_int8(model, lengths, f) for f in (True, False))
        assert fused_pool.k.dtype == torch.int8 and fused_pool.k_scale.dtype == torch.float16
        counted = fused.path_counts[int8_path(model)]
        assert counted == len(lengths) and int8_path(model) == "cpu-fused-step fp32 (int8 KV)"
        lens, feed = list(lengths), [7, 8, 9]
        for _ in range(3):  # batched decode: one new token per sequence
            step = StepRows(feed, lens, [0, 1, 2], [0, 1, 2],
                            [SeqSlice(i, 1, n + 1, t) for i, (n, t) in enumerate(zip(lens, tables))])
            got, want = fused.forward_batch(step, fused_pool), ref.forward_batch(step, ref_pool)
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
            assert got.argmax(-1).tolist() == want.argmax(-1).tolist()
            feed, lens = want.argmax(-1).tolist(), [n + 1 for n in lens]
        # a speculative verify's shape: 4 positions of sequence 0 (into its spare block), every row scored
        n0 = lens[0]
        tables[0] += [31]
        step = StepRows([1, 2, 3, 4], list(range(n0, n0 + 4)), [0] * 4, [0, 1, 2, 3], [SeqSlice(0, 4, n0 + 4, tables[0])])
        got, want = fused.forward_batch(step, fused_pool), ref.forward_batch(step, ref_pool)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        assert got.argmax(-1).tolist() == want.argmax(-1).tolist()
    finally:
        torch.set_num_threads(before)
    assert fused.path_counts[int8_path(model)] == counted + 4 and ref.path_counts["torch reference (int8 KV)"] == 7
    for name in ("k", "v", "k_scale", "v_scale"):
        assert torch.equal(getattr(fused_pool, name), getattr(ref_pool, name)), name


@needs_kernels
def test_int8_pages_without_their_fp16_scales_are_a_clear_error(model):
    cfg = model.config
    pool = PagedKVPool(cfg.n_layers, 2, cfg.n_kv_heads, 4, cfg.head_dim, kv_dtype="int8")
    step = runner_for(model).fused
    args = (torch.tensor([5]), torch.tensor([0]), torch.tensor([0]), torch.tensor([[0]]), pool.k, pool.v, torch.tensor([0]))
    for scales in ({}, {"k_scale": pool.k_scale.float(), "v_scale": pool.v_scale}):
        with pytest.raises(RuntimeError, match="int8 pages need contiguous fp16 scales"):
            step.forward_rows(*args, **scales)
    assert not pool.k.any() and not pool.k_scale.any()  # checked before anything was written


@needs_kernels
def test_scheduled_generation_over_int8_pages_is_token_identical_fused_or_torch(model, monkeypatch):
    prompts = [[3, 17, 42, 5, 9, 11, 20], [8, 8, 30, 3, 60], [50, 51, 52, 53, 54, 55, 56, 57, 58]]
    fused, seen = run_engine(model, prompts, "int8")
    assert all(dtype == torch.int8 and scaled for dtype, scaled in seen)
    monkeypatch.setattr(runner_for(model), "fused", None)
    before = runner_for(model).path_counts["torch reference (int8 KV)"]
    ref, seen_ref = run_engine(model, prompts, "int8")
    assert runner_for(model).path_counts["torch reference (int8 KV)"] - before == len(seen_ref)
    assert fused == ref


def test_4k_context_run_holds_1_9x_the_tokens_of_bf16_in_the_same_bytes():
    """Pool bytes of one 4,096-token bf16 context; the int8 pool of those bytes runs two ~4K requests at once."""
    torch.manual_seed(0)
    cfg = tiny_config(dim=128, n_heads=2, n_kv_heads=1, max_seq_len=4096)  # head_dim 64, as SmolLM2
    model = build_model(cfg, None, torch.device("cpu"))
    bs = 16
    bf16 = PagedKVPool(cfg.n_layers, 4096 // bs, cfg.n_kv_heads, bs, cfg.head_dim, torch.bfloat16)
    per_block = pool_bytes_per_token(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, torch.float32, "int8") * bs
    blocks = bf16.nbytes() // per_block  # 496 int8 blocks in the bytes of 256 bf16 ones
    assert blocks * per_block <= bf16.nbytes() and blocks * bs >= 1.9 * bf16.capacity_tokens
    n_new = 2
    prompt_len = blocks * bs // 2 - n_new  # two requests fill every slot: 7,936 tokens = 1.94 × 4,096
    gen = torch.Generator().manual_seed(0)
    params = GenerationParams(max_new_tokens=n_new, stop_at_eos=False)
    reqs = [Request(f"r{i}", torch.randint(3, cfg.vocab_size, (prompt_len,), generator=gen).tolist(), params)
            for i in range(2)]
    config = SchedulerConfig(block_size=bs, num_blocks=blocks, max_num_seqs=2, max_num_batched_tokens=2 * prompt_len,
                             kv_dtype="int8")
    sched, _ = drive(LoadedModel("tiny-4k", model, None, torch.device("cpu")), reqs, config, trace=False)
    assert sched.num_preemptions == 0 and all(len(r.output_ids) == n_new for r in sched.requests.values())
    peak = max(s["slots_filled"] for s in sched.step_stats)
    assert peak >= 2 * prompt_len and peak >= 1.9 * bf16.capacity_tokens


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs over an int8 pool need a GPU")
def test_cuda_graph_steps_over_an_int8_pool():
    """bf16 compute on CUDA: the lent int8 pool's graphs are captured at lending, every step replays them."""
    torch.manual_seed(0)
    model = build_model(tiny_config(max_seq_len=128), None, torch.device("cuda"), torch.bfloat16)
    prompts = [[3, 17, 42, 5, 9, 11, 20], [8, 8, 30, 3, 60]]
    tokens, seen = run_engine(model, prompts, "int8")
    assert seen and all(dtype == torch.int8 and scaled for dtype, scaled in seen)
    assert any("cuda graph" in p and "int8 KV" in p for p in runner_for(model).path_counts), runner_for(model).path_counts
    ref, _ = run_engine(model, prompts, "auto")
    agree = sum(a == b for x, y in zip(tokens, ref) for a, b in zip(x, y)) / sum(map(len, ref))
    assert agree >= 0.6, (tokens, ref)


# ------------------------------------------------------------------------------------- real SmolLM2
AGREEMENT_PROMPTS = ["The capital of France is", "Photosynthesis is the process by which",
                     "def fibonacci(n):", "The old lighthouse keeper looked out at the sea and"]


@pytest.mark.model
def test_real_model_greedy_tokens_agree_with_fp32_kv(engine):
    """Greedy SmolLM2 tokens over the int8 pool against fp32 KV; the bound is content/quantization.md's figure."""
    params = GenerationParams(max_new_tokens=32, stop_at_eos=False)
    int8 = LoadedModel(engine.name, engine.model, engine.tokenizer, engine.device, kv_dtype="int8")
    runner = runner_for(engine.model)
    before = runner.path_counts[int8_path(engine.model)]
    same = total = 0
    for prompt in AGREEMENT_PROMPTS:
        ids = engine.encode_prompt(prompt, chat=False)
        ref, got = engine.generate_ids(ids, params), int8.generate_ids(ids, params)
        same += sum(a == b for a, b in zip(ref, got))
        total += len(ref)
    print(f"int8 KV greedy agreement: {same}/{total}")
    assert runner.path_counts[int8_path(engine.model)] - before == len(AGREEMENT_PROMPTS) * 32  # every step
    assert same / total >= 0.9


@pytest.mark.model
@needs_kernels
def test_real_model_fused_int8_kv_is_token_identical_to_the_torch_step(engine, monkeypatch):
    """SmolLM2 over int8 pages: the fused step's greedy tokens are the torch reference step's."""
    params = GenerationParams(max_new_tokens=16, stop_at_eos=False)
    int8 = LoadedModel(engine.name, engine.model, engine.tokenizer, engine.device, kv_dtype="int8")
    runner = runner_for(engine.model)
    prompts = [engine.encode_prompt(p, chat=False) for p in AGREEMENT_PROMPTS[:2]]
    before = runner.path_counts["cpu-fused-step fp32 (int8 KV)"]
    fused = [int8.generate_ids(ids, params) for ids in prompts]
    assert runner.path_counts["cpu-fused-step fp32 (int8 KV)"] - before == 2 * 16
    monkeypatch.setattr(runner, "fused", None)
    assert [int8.generate_ids(ids, params) for ids in prompts] == fused


@pytest.mark.model
def test_quantize_report_kv_int8_row_measures_the_int8_pool():
    """The report's row is the int8 pool's own: its path, its bytes, and a quality that differs from fp32's."""
    from inference_core.quant.report import KV_INT8, report

    rows = {r["format"]: r for r in report(formats=["fp32"], max_tokens=64, window=64, new_tokens=3, repeats=1,
                                           kv_int8=True)}
    row = rows[KV_INT8]
    assert row["kernels"] == ["cpu-fused-step fp32 (int8 KV)" if quant_kernels.load(engine_settings()) else "torch reference (int8 KV)"]
    assert row["kv_bytes_per_token"] == 11_880 and rows["fp32"]["kv_bytes_per_token"] == 46_080
    assert row["kv_capacity_vs_model_dtype"] == pytest.approx(3.88, abs=0.01)
    assert 0 < row["kl_vs_fp32"] < 0.01 and row["decode_tokens_per_s"] > 0
