"""Prefix caching: chained keys, sharing by refcount, skipped prefill, LRU eviction only under pressure."""
from __future__ import annotations

import pytest
import torch

from engine_reference import tiny_config
from inference_core.engine.loaded_model import GenerationParams, LoadedModel
from inference_core.model.loader import build_model
from engine_reference import KVCache, check
from inference_core.engine.paged import BlockAllocator
from inference_core.engine.prefix_cache import PrefixCache, chain_hashes
from inference_core.engine.llm_engine import LLMEngine, drive
from inference_core.model.sampling import SamplingParams
from inference_core.engine.scheduler import Request, SchedulerConfig


def single_request(model, prompt: list[int], n: int) -> list[int]:
    """Greedy reference: one request alone, contiguous cache."""
    cfg = model.config
    cache = KVCache.allocate(cfg.n_layers, 1, cfg.n_kv_heads, len(prompt) + n, cfg.head_dim, torch.float32, "cpu")
    seq = list(prompt)
    with torch.inference_mode():
        for step in range(n):
            feed, start = (seq, 0) if step == 0 else (seq[-1:], len(seq) - 1)
            logits = model(torch.tensor([feed]), torch.arange(start, start + len(feed)), cache, last_only=True)
            seq.append(int(logits[0, -1].argmax()))
    return seq[len(prompt):]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny_engine():
    model = build_model(tiny_config(), None, torch.device("cpu"))
    return LoadedModel("tiny", model, None, torch.device("cpu"))


def test_chained_hash_names_the_whole_prefix():
    a = chain_hashes([1, 2, 3, 4, 5, 6, 7], 2)
    b = chain_hashes([1, 2, 3, 4, 9, 9, 7, 7], 2)
    c = chain_hashes([9, 2, 3, 4], 2)
    assert len(a) == 3 and len(b) == 4  # only full blocks get a key
    assert a[:2] == b[:2] and a[2] != b[2]
    assert c[1] != a[1]  # same tokens in block 1, different parent → different key


def test_match_register_and_evict_on_reuse():
    alloc = BlockAllocator(3)
    evicted = []
    cache = PrefixCache(alloc, 2, on_evict=evicted.append)
    hs = chain_hashes([1, 2, 3, 4], 2)
    b0, b1 = alloc.allocate(), alloc.allocate()
    assert cache.register(b0, hs[0]) and cache.register(b1, hs[1])
    assert not cache.register(alloc.allocate(), hs[0])  # a duplicate prefix stays private
    alloc.free(b1)
    alloc.free(b0)  # both cached and free: LRU order b1, b0 (b2 is still held)
    assert cache.match(hs) == [b0, b1]
    assert alloc.allocate() == b1 and evicted == [b1]  # reused only because it was needed
    assert cache.match(hs) == [b0]


def shared_prefix_jobs(prefix_len: int = 21):
    prefix = [(7 * i) % 90 + 3 for i in range(prefix_len)]
    return [(prefix + [11, 12, 13], 6), (prefix + [20, 21], 8), (prefix + [11, 12, 13, 14, 15], 5), (prefix[:9], 4)]


def test_hits_skip_prefill_and_never_change_outputs(tiny_engine):
    jobs = shared_prefix_jobs()
    reqs = [Request(f"r{i}", p, SamplingParams(max_new_tokens=n, stop_at_eos=False)) for i, (p, n) in enumerate(jobs)]
    sched, events = drive(tiny_engine, reqs, SchedulerConfig(block_size=4, num_blocks=40, prefix_caching=True),
                          arrival_steps={"r1": 3, "r2": 4, "r3": 5})
    for i, (p, n) in enumerate(jobs):
        assert sched.requests[f"r{i}"].output_ids == single_request(tiny_engine.model, p, n)
    # r1 reuses the 5 full blocks of the 21-token prefix; r2 also r0's 6th block (prefix[20], 11, 12, 13);
    # r3 (9 tokens) reuses 2 blocks and computes only its last token
    assert [sched.requests[f"r{i}"].num_cached_tokens for i in range(4)] == [0, 20, 24, 8]
    prefill = {x["request_id"]: x["n_tokens"] for e in events if e.type == "batch_step" for x in e.entries
               if x["phase"] == "prefill"}
    assert prefill == {"r0": 24, "r1": 3, "r2": 2, "r3": 1}
    shared = [e for e in events if e.type == "kv_block" and e.op == "shared"]
    assert {e.request_id for e in shared} == {"r1", "r2", "r3"}
    m = sched.run_metrics()
    assert m["prefix_cache_hits"] == 52 and m["prefix_cache_queries"] == sum(len(p) for p, _ in jobs)
    assert m["prefix_cache_hit_rate"] == pytest.approx(52 / m["prefix_cache_queries"])


def test_cached_blocks_survive_until_memory_is_needed(tiny_engine):
    cfg = SchedulerConfig(block_size=4, num_blocks=10, prefix_caching=True)
    llm = LLMEngine(tiny_engine, cfg)
    sched = llm.scheduler
    prefix = list(range(3, 19))  # 16 tokens = 4 full blocks
    sched.add_request(Request("a", prefix + [40], SamplingParams(max_new_tokens=2)))
    while sched.has_work():
        llm.step()
    assert sched.allocator.num_free == 10 and sched.prefix.num_cached == 4
    sched.add_request(Request("b", prefix + [50], SamplingParams(max_new_tokens=2)))  # hits all 4 after the wait
    events = []
    while sched.has_work():
        events += llm.step()
    assert sched.requests["b"].num_cached_tokens == 16
    assert not [e for e in events if e.type == "kv_block" and e.op == "evicted"]
    # A request that needs every block forces the cached ones out, least recently used first.
    sched.add_request(Request("c", list(range(60, 96)), SamplingParams(max_new_tokens=3)))
    events = []
    while sched.has_work():
        events += llm.step()
    assert [e for e in events if e.type == "kv_block" and e.op == "evicted"]
    assert sched.requests["c"].output_ids == single_request(tiny_engine.model, list(range(60, 96)), 3)
    check(sched.allocator)


@pytest.mark.model
def test_real_model_prefix_hit_same_tokens(engine):
    tok = engine.tokenizer
    system = ("You are a patient tutor. Explain ideas step by step, use short sentences, and give one example. "
              "Always answer in English. ")
    prompts = [system + "Question: what is a prime number?", system + "Question: why is the sky blue?"]
    want = [engine.generate_ids(tok.encode(p), GenerationParams(max_new_tokens=6)) for p in prompts]
    reqs = [Request(f"r{i}", tok.encode(p), SamplingParams(max_new_tokens=6)) for i, p in enumerate(prompts)]
    sched, _ = drive(engine, reqs, SchedulerConfig(block_size=8, num_blocks=32, prefix_caching=True),
                     arrival_steps={"r1": 1})
    assert sched.requests["r1"].num_cached_tokens >= 16
    assert [sched.requests[f"r{i}"].output_ids for i in range(2)] == want
