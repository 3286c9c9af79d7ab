"""Block allocator invariants and paged attention == contiguous attention (tiny random models and SmolLM2)."""
from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine_reference import tiny_config
from inference_core.model.loader import build_model
from engine_reference import KVCache, check
from inference_core.model.kv_cache import NoCache
from inference_core.engine.paged import BlockAllocator, BlockTable, NoFreeBlocks, PagedBackend, PagedKVPool, SeqSlice


pytestmark = pytest.mark.usefixtures("one_thread")


# ---- allocator ------------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(n_blocks=st.integers(1, 12), ops=st.lists(st.tuples(st.sampled_from("afs"), st.integers(0, 10**6)), max_size=80))
def test_allocator_invariants_under_random_ops(n_blocks, ops):
    """No block is both free and used, refcounts balance, and everything is free after releasing all refs."""
    alloc = BlockAllocator(n_blocks)
    held: list[int] = []  # one entry per reference we own
    for op, pick in ops:
        if op == "a":
            if alloc.num_free == 0:
                with pytest.raises(NoFreeBlocks):
                    alloc.allocate()
            else:
                b = alloc.allocate()
                assert b not in held, "handed out a block that is still referenced"
                held.append(b)
        elif op == "s" and held:
            b = held[pick % len(held)]
            alloc.incref(b)
            held.append(b)
        elif op == "f" and held:
            b = held.pop(pick % len(held))
            alloc.free(b)
        check(alloc)
        for b in range(n_blocks):
            assert alloc.refcount[b] == held.count(b)
        assert alloc.num_used == len(set(held))
    for b in held:
        alloc.free(b)
    check(alloc)
    assert alloc.num_free == n_blocks
    with pytest.raises(ValueError):
        alloc.free(0)


def test_free_queue_is_lru_and_revival_leaves_it():
    alloc = BlockAllocator(4)
    a, b, c, d = (alloc.allocate() for _ in range(4))
    alloc.free(c)
    alloc.free(a)
    alloc.incref(c)  # a cached block revived by a prefix hit is no longer free
    assert alloc.num_free == 1 and not alloc.is_free(c)
    reused = []
    alloc.on_reuse = reused.append
    assert alloc.allocate() == a
    assert reused == [a]
    check(alloc)


def test_block_table_sizes():
    t = BlockTable(16, [3, 9])
    assert t.blocks_needed(32) == 0 and t.blocks_needed(33) == 1 and t.blocks_needed(80) == 3


# ---- paged attention vs contiguous ----------------------------------------------------------------------
def run_paged(model, seqs: list[list[int]], block_size: int, chunks: list[list[int]], num_blocks: int = 64,
              shuffle_blocks: bool = True, seed: int = 0) -> list[list[torch.Tensor]]:
    """Feed each sequence in the given chunk sizes, all sequences flattened into one row per step.

    Returns, per sequence, the logits of the last token of every chunk. Physical blocks are handed out in a
    shuffled order so tables are non-contiguous and interleaved across sequences.
    """
    cfg = model.config
    pool = PagedKVPool(cfg.n_layers, num_blocks, cfg.n_kv_heads, block_size, cfg.head_dim)
    alloc = BlockAllocator(num_blocks)
    if shuffle_blocks:
        order = list(range(num_blocks))
        random.Random(seed).shuffle(order)
        alloc._free = type(alloc._free)((b, None) for b in order)
    backend = PagedBackend(pool)
    tables = [BlockTable(block_size) for _ in seqs]
    done = [0] * len(seqs)
    out: list[list[torch.Tensor]] = [[] for _ in seqs]
    for step in range(max(len(c) for c in chunks)):
        slices, toks, pos, rows, who = [], [], [], [], []
        for i, s in enumerate(seqs):
            if step >= len(chunks[i]):
                continue
            n = chunks[i][step]
            for _ in range(tables[i].blocks_needed(done[i] + n)):
                tables[i].blocks.append(alloc.allocate())
            slices.append(SeqSlice(len(toks), n, done[i] + n, tables[i].blocks))
            toks += s[done[i]:done[i] + n]
            pos += range(done[i], done[i] + n)
            rows.append(len(toks) - 1)
            who.append(i)
            done[i] += n
        backend.begin_step(slices)
        with torch.inference_mode():
            hidden = model.hidden_states(torch.tensor([toks]), torch.tensor(pos), backend)
            logits = model.compute_logits(hidden[0, torch.tensor(rows)])
        for r, i in enumerate(who):
            out[i].append(logits[r])
    return out


def contiguous_logits(model, seq: list[int], chunk_sizes: list[int]) -> list[torch.Tensor]:
    cfg = model.config
    cache = KVCache.allocate(cfg.n_layers, 1, cfg.n_kv_heads, len(seq), cfg.head_dim, torch.float32, "cpu")
    out, done = [], 0
    with torch.inference_mode():
        for n in chunk_sizes:
            logits = model(torch.tensor([seq[done:done + n]]), torch.arange(done, done + n), cache, last_only=True)
            out.append(logits[0, -1])
            done += n
    return out


def random_chunks(rng: random.Random, length: int) -> list[int]:
    """A prefill (sometimes after a cached-looking first chunk), then single-token decodes."""
    first = rng.randint(1, length)
    chunks = [first]
    rest = length - first
    if rest > 4 and rng.random() < 0.3:
        k = rng.randint(2, rest - 1)  # a multi-token chunk over existing context (recompute / prefix hit)
        chunks.append(k)
        rest -= k
    return chunks + [1] * rest


@pytest.mark.parametrize("seed", range(6))
def test_paged_equals_contiguous_random_configs(seed):
    rng = random.Random(seed)
    kv = rng.choice([1, 2, 4])
    cfg = tiny_config(n_heads=4, n_kv_heads=kv, dim=rng.choice([32, 64]), n_layers=rng.choice([1, 2, 3]))
    torch.manual_seed(seed)
    model = build_model(cfg, None, torch.device("cpu"))
    block_size = rng.choice([1, 2, 3, 4, 16])
    seqs = [[rng.randrange(cfg.vocab_size) for _ in range(rng.randint(1, 30))] for _ in range(rng.randint(1, 5))]
    chunks = [random_chunks(rng, len(s)) for s in seqs]
    got = run_paged(model, seqs, block_size, chunks, num_blocks=sum(len(s) for s in seqs) + 8, seed=seed)
    for s, c, g in zip(seqs, chunks, got):
        want = contiguous_logits(model, s, c)
        for a, b in zip(g, want):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_decode_batch_sees_only_its_own_blocks(tiny_model):
    """Padding in the batched decode gather is masked: a long neighbour never leaks into a short sequence."""
    short, long = [5, 6, 7], list(range(10, 50))
    got = run_paged(tiny_model, [short, long], 4, [[2, 1], [38, 1, 1]])
    with torch.inference_mode():
        ref = tiny_model(torch.tensor([short]), torch.arange(3), NoCache())[0, -1]
    torch.testing.assert_close(got[0][-1], ref, rtol=1e-5, atol=1e-5)


@pytest.mark.model
def test_paged_equals_contiguous_real_model(engine):
    tok = engine.tokenizer
    seqs = [tok.encode("The capital of France is Paris, and the capital of Italy is"),
            tok.encode("def add(a, b):\n    return"),
            tok.encode("One two three four five six seven eight nine ten eleven twelve thirteen fourteen")]
    chunks = [[len(s) - 3, 1, 1, 1] for s in seqs]
    chunks[1] = [len(seqs[1]) - 6, 3, 1, 1, 1]  # a multi-token chunk over cached context
    got = run_paged(engine.model, seqs, 16, chunks, num_blocks=16)
    for s, c, g in zip(seqs, chunks, got):
        want = contiguous_logits(engine.model, s, c)
        for a, b in zip(g, want):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
            assert int(a.argmax()) == int(b.argmax())
