"""Bucketed step graphs over the paged pool (paged_graphs.py) against the runner's reference step.

On the CPU the buckets' static buffers run eagerly (no capture): padding, slot writes, fixed-width tables and
both attention paths (the torch gather + SDPA, and Triton's paged-decode kernel in its interpreter) are checked
here, in CI. On a GPU the same steps are captured and replayed (last test).
"""
from __future__ import annotations

import copy
import os

import pytest
import torch

from engine_reference import tiny_config
from inference_core.model.loader import build_model
from inference_core.engine.paged import SeqSlice
from inference_core.kernels.paged_graphs import BUCKETS, StepGraphs, bucket_for
from inference_core.engine.request import StepRows
from inference_core.engine.model_runner import ModelRunner

if not torch.cuda.is_available():  # Triton decides at import whether kernels run in its CPU interpreter
    os.environ.setdefault("TRITON_INTERPRET", "1")

BS = 4


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return build_model(tiny_config(max_seq_len=64), None, torch.device("cpu"))


def for_attention(model, use_triton: bool):
    """The model where its attention path runs: compiled Triton reads CUDA memory only, so on a GPU machine the
    Triton cases run on the GPU (on the CPU, Triton's interpreter runs them on CPU tensors)."""
    if use_triton:
        pytest.importorskip("triton")
        if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
            return copy.deepcopy(model).to("cuda")
    return model


def prefilled(model, lengths: list[int]):
    """A pool holding one sequence per length (blocks handed out interleaved, so tables are not contiguous)."""
    runner = ModelRunner(model)
    pool = runner.new_kv_pool(64, BS)
    gen = torch.Generator().manual_seed(1)
    tables: list[list[int]] = [[] for _ in lengths]
    free = iter(range(64))
    for i in range(max(-(-n // BS) for n in lengths) + 1):  # +1: room for the decode token
        for t, n in zip(tables, lengths):
            if i <= n // BS:
                t.append(next(free))
    for t, n in zip(tables, lengths):
        tokens = torch.randint(3, model.config.vocab_size, (n,), generator=gen).tolist()
        runner.forward_batch(StepRows(tokens, list(range(n)), [0] * n, [n - 1], [SeqSlice(0, n, n, t)]), pool)
    return runner, pool, tables


def decode_step(lengths: list[int], tables: list[list[int]], tokens: list[int]) -> StepRows:
    slices = [SeqSlice(j, 1, n + 1, t) for j, (n, t) in enumerate(zip(lengths, tables))]
    return StepRows(tokens, list(lengths), list(range(len(lengths))), list(range(len(lengths))), slices)


def test_buckets():
    assert [bucket_for(n) for n in (1, 2, 3, 5, 8, 9, 17, 32, 33, 64)] == [1, 2, 4, 8, 8, 16, 32, 32, 64, 64]
    assert BUCKETS[-1] == 64
    # every bucket's quantized linears run the fused kernels: a captured step never dequantizes per call (NF4's
    # dequantize would even copy its codebook from the host, which a capture forbids)
    from inference_core.quant.linears import TRITON_MAX_ROWS

    assert BUCKETS[-1] <= TRITON_MAX_ROWS


@pytest.mark.parametrize("use_triton", [False, True], ids=["torch-attention", "triton-attention"])
@pytest.mark.parametrize("lengths", [[5], [3, 17, 8], [4, 9, 1, 30, 12]], ids=["1→1", "3→4", "5→8"])
def test_a_padded_bucket_step_equals_the_reference_step(model, lengths, use_triton):
    model = for_attention(model, use_triton)
    runner, pool, tables = prefilled(model, lengths)
    before = pool.k.clone()
    step = decode_step(lengths, tables, [7 + 3 * i for i in range(len(lengths))])
    graphs = equal_to_reference(model, runner, pool, step, use_triton)
    assert graphs.replays == {bucket_for(len(lengths)): 1}
    # only the blocks holding the new positions were written (padded rows repeat the last row's write)
    changed = (pool.k != before).flatten(2).any(-1).any(0).nonzero().flatten().tolist()
    assert sorted(changed) == sorted({t[n // BS] for t, n in zip(tables, lengths)})


def equal_to_reference(model, runner, pool, step: StepRows, use_triton: bool,
                       graphs: StepGraphs | None = None, n_layers: int | None = None) -> StepGraphs:
    """The bucket's step (on new or given `graphs`) and the reference step (of `n_layers`) from the same pool:
    same logits, same K/V written."""
    before_k, before_v = pool.k.clone(), pool.v.clone()
    graphs = graphs or StepGraphs(model, pool, capture=False, use_triton=use_triton)
    assert graphs.applies(step)
    got = graphs.run(step)
    got_k, got_v = pool.k.clone(), pool.v.clone()
    pool.k.copy_(before_k)
    pool.v.copy_(before_v)
    want = runner.forward_batch(step, pool, n_layers)
    assert got.shape == want.shape == (len(step.rows), model.config.vocab_size)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)
    assert got.argmax(-1).tolist() == want.argmax(-1).tolist()
    torch.testing.assert_close(got_k, pool.k, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_v, pool.v, atol=1e-5, rtol=1e-5)
    return graphs


@pytest.mark.parametrize("use_triton", [False, True], ids=["torch-attention", "triton-attention"])
def test_a_speculative_verify_is_causal_rows_of_one_sequence(model, use_triton):
    """k+1 = 5 new tokens of one sequence, every row scored (a verify): row i sees the first i new tokens."""
    model = for_attention(model, use_triton)
    runner, pool, tables = prefilled(model, [10])
    table = tables[0] + [40, 41]  # room for positions 10..14 (a new block mid-step)
    step = StepRows([7, 8, 9, 10, 11], list(range(10, 15)), [0] * 5, list(range(5)), [SeqSlice(0, 5, 15, table)])
    graphs = equal_to_reference(model, runner, pool, step, use_triton)
    assert graphs.replays == {8: 1}


@pytest.mark.parametrize("use_triton", [False, True], ids=["torch-attention", "triton-attention"])
def test_a_narrower_step_after_a_wider_one_in_the_same_bucket(model, use_triton):
    """A step writes only the table columns its widest sequence uses: the next, narrower step in the same bucket
    leaves the wider one's block ids past them, which its rows never attend to."""
    model = for_attention(model, use_triton)
    runner, pool, tables = prefilled(model, [30, 25, 3, 6])
    graphs = StepGraphs(model, pool, capture=False, use_triton=use_triton)
    equal_to_reference(model, runner, pool, decode_step([30, 25], tables[:2], [7, 8]), use_triton, graphs)
    assert graphs.buckets[2].tables[:, 2:].any()  # the wide step's ids sit past the narrow step's columns
    equal_to_reference(model, runner, pool, decode_step([3, 6], tables[2:], [9, 10]), use_triton, graphs)
    assert graphs.replays == {2: 2}


def test_a_mixed_step_prefill_chunk_and_decodes(model):
    """A short prompt admitted beside two decoding sequences: only each sequence's last row is scored."""
    runner, pool, tables = prefilled(model, [6, 9])
    fresh = [50, 51]
    step = StepRows([5, 1, 2, 3, 4, 6], [6, 9, 0, 1, 2, 3], [0, 1, 2, 2, 2, 2], [0, 1, 5],
                    [SeqSlice(0, 1, 7, tables[0]), SeqSlice(1, 1, 10, tables[1]), SeqSlice(2, 4, 4, fresh)])
    equal_to_reference(model, runner, pool, step, use_triton=False)


def test_steps_a_graph_does_not_take(model):
    runner, pool, tables = prefilled(model, [6, 9])
    graphs = StepGraphs(model, pool, capture=False, use_triton=False)
    many = decode_step([6] * 65, [tables[0]] * 65, [5] * 65)
    assert not graphs.applies(many)  # more tokens than the largest bucket: the reference (or fused) path
    wide = decode_step([6], [list(range(65))], [5])
    assert not graphs.applies(wide)  # a table wider than the pool can hold


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_captured_buckets_replay_the_scheduled_steps_of_a_batch():
    """On a GPU the engine's short steps replay captured graphs; batched outputs equal single requests."""
    from inference_core import SamplingParams
    from inference_core.engine.loaded_model import LoadedModel
    from inference_core.engine.llm_engine import drive
    from inference_core.engine.model_runner import runner_for
    from inference_core.engine.scheduler import Request, SchedulerConfig

    cuda_model = build_model(tiny_config(max_seq_len=64), None, torch.device("cuda"))
    engine = LoadedModel("tiny", cuda_model, None, torch.device("cuda"))
    runner = runner_for(cuda_model)
    assert runner.use_step_graphs
    prompts = [[5, 17, 3], [9, 2, 44, 8, 1, 7], [60], [11, 12, 13, 14, 15]]

    def run(batch):
        reqs = [Request(f"r{i}", p, SamplingParams(max_new_tokens=9, stop_at_eos=False)) for i, p in enumerate(batch)]
        drive(engine, reqs, SchedulerConfig(block_size=BS, num_blocks=40))
        return [r.output_ids for r in reqs]

    together = run(prompts)
    assert together == [run([p])[0] for p in prompts]
    assert any(k.startswith("cuda graph paged step") for k in runner.path_counts), runner.path_counts


def test_prepare_all_builds_every_bucket_before_any_block_is_held(model):
    """A new pool's buckets are built (captured, on a GPU) up front; the warm-up writes to block 0 change nothing
    for the sequences that hold blocks afterwards, block 0 included."""
    runner = ModelRunner(model)
    pool = runner.new_kv_pool(64, BS)
    graphs = StepGraphs(model, pool, capture=False, use_triton=False)
    graphs.prepare_all()
    assert sorted(graphs.buckets) == list(BUCKETS) and graphs.replays == {}  # warm-ups are not graph hits
    assert pool.k[:, 0].any() and not pool.k[:, 1:].any()  # only block 0 was written
    runner_b, pool_b, tables = prefilled(model, [5, 9])  # a pool that never saw a warm-up
    assert tables[0][0] == 0  # the first sequence starts on block 0
    pool.k.copy_(pool_b.k)  # the same sequences now sit in the warmed pool
    pool.v.copy_(pool_b.v)
    step = decode_step([5, 9], tables, [7, 8])
    torch.testing.assert_close(graphs.run(step), runner_b.forward_batch(step, pool_b), atol=2e-5, rtol=1e-4)


def test_batch_runs_borrow_a_pool_with_every_bucket_built(model, monkeypatch):
    """The runner lends an LLMEngine its pool (a power-of-two size class) with the step buckets built when the
    pool was made; the next run of the class borrows the same pool and buckets, builds nothing, and its
    outputs are unchanged. The bucket path is forced on the CPU (it runs eagerly there)."""
    from inference_core.engine.loaded_model import LoadedModel
    from inference_core.engine.llm_engine import drive
    from inference_core.model.sampling import SamplingParams
    from inference_core.engine.scheduler import Request, SchedulerConfig

    engine = LoadedModel("tiny", model, None, torch.device("cpu"))
    config = SchedulerConfig(block_size=BS, num_blocks=20)

    def outputs() -> list[list[int]]:
        reqs = [Request(f"r{i}", list(range(3 + i, 9 + 2 * i)), SamplingParams(max_new_tokens=6, stop_at_eos=False))
                for i in range(3)]
        drive(engine, reqs, config, trace=False)
        return [r.output_ids for r in reqs]

    want = outputs()  # the runner's usual CPU path
    runner = ModelRunner(model)
    monkeypatch.setattr(runner, "fused", None)
    monkeypatch.setattr(runner, "_graphable", True)  # CUDA's condition
    monkeypatch.setitem(model.__dict__, "_runner", runner)  # the runner runner_for(model) returns
    assert outputs() == want
    assert [k for k in runner.path_counts if k.startswith("eager paged step")], runner.path_counts
    (pool,) = [p for pools in runner._spare_pools.values() for p in pools]
    assert pool.num_blocks == 32  # 20 blocks asked for: the class of 32
    graphs = pool.step_graphs
    buckets = dict(graphs.buckets)
    assert sorted(buckets) == list(BUCKETS)
    hits = sum(graphs.replays.values())
    assert outputs() == want
    assert [p for pools in runner._spare_pools.values() for p in pools] == [pool]  # borrowed and given back
    assert pool.step_graphs is graphs and graphs.buckets == buckets  # nothing built again
    assert sum(graphs.replays.values()) == 2 * hits


def test_a_model_its_runner_and_their_pools_go_together():
    """The runner lives on its model, and a pool holds its step graphs (the module-level tables they sat in kept
    every model, runner and pool alive for good): once the last holder drops the model, all of them are collected,
    and a dropped pool frees its graphs at once. A copied model gets a runner of its own."""
    import copy
    import gc
    import weakref

    from inference_core.engine.model_runner import runner_for

    torch.manual_seed(0)
    m = build_model(tiny_config(max_seq_len=64), None, torch.device("cpu"))
    runner = runner_for(m)
    assert runner_for(m) is runner
    twin = copy.deepcopy(m)
    assert runner_for(twin) is not runner and runner_for(twin).model is twin

    dropped = runner.lend_pool(4, BS)
    graphs = weakref.ref(runner.step_graphs(dropped))
    assert graphs() is dropped.step_graphs and graphs().pool is dropped
    del dropped
    assert graphs() is None  # no cycle: freed without waiting for the collector

    pool = runner.lend_pool(20, BS)
    runner.step_graphs(pool).prepare_all()
    runner.give_back(pool)  # kept as a spare by the runner
    refs = [weakref.ref(x) for x in (m, runner, pool, pool.step_graphs, twin)]
    del m, runner, pool, twin
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)


def test_graphs_setting_is_read_per_call_not_fixed_with_the_runner():
    """A runner built while INFERENCE_CUDA_GRAPHS=0 was in force must use graphs once it is lifted: what the runner
    fixes at build (`graphable`) depends only on the device and the quantized kernels."""
    from bench.common import settings_override
    from inference_core.kernels.paged_graphs import graphable, graphs_enabled

    torch.manual_seed(0)
    m = build_model(tiny_config(max_seq_len=64), None, torch.device("cpu"))
    cuda = torch.device("cuda")
    with settings_override(cuda_graphs=False):
        assert graphable(m, cuda) and not graphs_enabled(m, cuda)
    assert graphs_enabled(m, cuda) and not graphable(m, torch.device("cpu"))


def test_spare_pools_are_capped_per_class_and_in_bytes(model):
    """Given-back pools wait for the next holder of their size class: at most MAX_SPARE_POOLS a class, and no more
    bytes in all than the device's share (RAM here)."""
    from inference_core.engine.model_runner import MAX_SPARE_POOLS, SPARE_POOL_BYTES, pool_size_class

    runner = ModelRunner(model)
    assert runner._spare_bytes == SPARE_POOL_BYTES
    lent = [runner.lend_pool(20, BS) for _ in range(MAX_SPARE_POOLS + 1)]
    assert {p.num_blocks for p in lent} == {pool_size_class(20)} and len({id(p) for p in lent}) == len(lent)
    for p in lent:
        runner.give_back(p)
    assert len(runner._spare_pools[(32, BS, model.config.n_layers, "auto")]) == MAX_SPARE_POOLS
    assert runner.lend_pool(17, BS, kv_dtype="int8") not in lent  # an int8 pool is a class of its own
    assert runner.lend_pool(17, BS) in lent  # the same class borrows a spare

    small = ModelRunner(model)
    small._spare_bytes = lent[0].nbytes() + lent[0].nbytes() // 2
    a, b = small.lend_pool(20, BS), small.lend_pool(20, BS)
    small.give_back(a)
    small.give_back(b)  # over the byte cap: dropped
    assert small._spare_pools[(32, BS, model.config.n_layers, "auto")] == [a]


@pytest.mark.parametrize("use_triton", [False, True], ids=["torch-attention", "triton-attention"])
def test_an_early_exit_drafts_steps_run_its_layers_over_its_shallower_pool(model, use_triton):
    """An early-exit draft's pool holds only its first layers: a bucket step over it runs those layers and the
    head, as the reference step with n_layers does (a prompt chunk, then a decode)."""
    model = for_attention(model, use_triton)
    runner = ModelRunner(model)
    pool = runner.new_kv_pool(16, BS, n_layers=1)
    graphs = StepGraphs(model, pool, capture=False, use_triton=use_triton)
    table = [3, 7, 1]
    prompt = StepRows([5, 9, 2, 44, 8, 1, 7], list(range(7)), [0] * 7, [6], [SeqSlice(0, 7, 7, table)])
    equal_to_reference(model, runner, pool, prompt, use_triton, graphs, n_layers=1)
    runner.forward_batch(prompt, pool, n_layers=1)  # the pool as the draft would leave it
    equal_to_reference(model, runner, pool, decode_step([7], [table], [30]), use_triton, graphs, n_layers=1)
    assert graphs.replays == {8: 1, 1: 1}


def test_the_runner_sends_an_early_exit_drafts_steps_to_its_step_graphs(model, monkeypatch):
    """With the bucket path forced on the CPU (CUDA's condition), a sequence lent at depth 1 has its buckets
    built at lending and its steps of n_layers=1 replay them, with the logits of the usual path."""
    usual = ModelRunner(model)
    forced = ModelRunner(model)
    monkeypatch.setattr(forced, "fused", None)
    monkeypatch.setattr(forced, "_graphable", True)
    seqs = [r.new_sequence(40, BS, n_layers=1) for r in (usual, forced)]
    assert sorted(seqs[1].pool.step_graphs.buckets) == list(BUCKETS)  # prepared when lent
    for feed in ([5, 9, 2, 44, 8], [30], [31, 32, 33]):
        want, got = (r.forward_sequence(feed, s, all_rows=True, n_layers=1) for r, s in zip((usual, forced), seqs))
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)
    assert sum(seqs[1].pool.step_graphs.replays.values()) == 3
    assert [k for k in forced.path_counts if k.startswith("eager paged step")], forced.path_counts


@pytest.mark.parametrize("use_triton", [False, True], ids=["torch-attention", "triton-attention"])
def test_bf16_bucket_steps_follow_the_reference(use_triton):
    """bf16, the CUDA default: a bf16 pool's bucket step (bf16 K/V writes, attention over bf16 pages) gives the
    reference step's logits up to bf16 rounding, and bf16 logits."""
    torch.manual_seed(0)
    m16 = for_attention(build_model(tiny_config(max_seq_len=64), None, torch.device("cpu"), torch.bfloat16), use_triton)
    runner, pool, tables = prefilled(m16, [5, 12, 3])
    assert pool.k.dtype == torch.bfloat16
    step = decode_step([5, 12, 3], tables, [7, 8, 9])
    before_k, before_v = pool.k.clone(), pool.v.clone()
    got = StepGraphs(m16, pool, capture=False, use_triton=use_triton).run(step)
    pool.k.copy_(before_k)
    pool.v.copy_(before_v)
    want = runner.forward_batch(step, pool)
    assert got.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want.float(), atol=1e-2, rtol=1e-2)  # logits here: std 0.19


def test_a_cpu_pool_on_a_gpu_machine_takes_the_torch_attention(model, monkeypatch):
    """Where compiled Triton runs (a CUDA machine, no interpreter), a CPU engine's step graphs still attend with
    torch: compiled kernels cannot read CPU memory (the H100 run of session 26 failed here)."""
    from inference_core.kernels import triton_kernels

    runner, pool, tables = prefilled(model, [5, 9])
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(triton_kernels, "why_unavailable", lambda: "")  # what a CUDA machine answers
    assert not StepGraphs(model, pool, capture=False).use_triton
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert StepGraphs(model, pool, capture=False).use_triton == triton_kernels.available()
    equal_to_reference(model, runner, pool, decode_step([5, 9], tables, [7, 8]), use_triton=False)


def test_a_spare_lent_while_graphs_were_off_gets_every_bucket_when_lent_again(model, monkeypatch):
    """A pool made while INFERENCE_CUDA_GRAPHS=0 has no step graphs; lent again with graphs on, it gets every bucket
    at lending, so no step of its next holder builds one (on a GPU: captures inside a timed step)."""
    from bench.common import settings_override

    runner = ModelRunner(model)
    monkeypatch.setattr(runner, "fused", None)
    monkeypatch.setattr(runner, "_graphable", True)  # CUDA's condition
    with settings_override(cuda_graphs=False):
        pool = runner.lend_pool(20, BS)
    assert pool.step_graphs is None
    runner.give_back(pool)
    again = runner.lend_pool(20, BS)
    assert again is pool and sorted(pool.step_graphs.buckets) == list(BUCKETS)
