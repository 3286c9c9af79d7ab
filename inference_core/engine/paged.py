"""Paged KV cache: fixed-size blocks, a block allocator, per-sequence block tables, paged attention.

Memory is one pool of `num_blocks` physical blocks, each holding `block_size` token slots for every layer
and KV head: k, v of shape [layers, num_blocks, kv_heads, block_size, head_dim]. A sequence owns a
`BlockTable` (logical block i → physical block id), so its K/V need not be contiguous and it never reserves
more than one partly filled block (the waste is < block_size slots per sequence).

`PagedBackend` implements the model's `AttentionBackend` for a *flattened variable-length batch*: the
scheduler feeds every running sequence's new tokens as one row [1, N_total] with per-token positions, after
`begin_step(...)` told the backend which slice of the row belongs to which sequence. Per layer the backend
scatters all N_total new K/V into their slots with one indexed write, then attends:
  * decode sequences (one new token each) together: one gather of their blocks, one masked SDPA;
  * prefill sequences one by one (their lengths differ too much to pad), each causal over its own context.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from ..model.kv_cache import sdpa


class NoFreeBlocks(RuntimeError):
    """The pool is exhausted; the scheduler answers by preempting a sequence."""


class BlockAllocator:
    """Free list + reference counts over physical block ids 0..num_blocks-1.

    Invariants: a block is in the free queue iff its refcount is 0; every operation is O(1).
    The free queue is ordered least-recently-freed first, so blocks that still hold prefix-cache
    content are reused (evicted) in LRU order. `on_reuse(block)` runs when a popped block is handed
    out again — the prefix cache uses it to forget that block's hash (an eviction).
    """

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 1:
            raise ValueError("need at least one block")
        self.num_blocks = num_blocks
        self.refcount = [0] * num_blocks
        self._free: OrderedDict[int, None] = OrderedDict((b, None) for b in range(num_blocks))
        self.on_reuse: Callable[[int], None] | None = None

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self._free)

    def is_free(self, block: int) -> bool:
        return block in self._free

    def allocate(self) -> int:
        if not self._free:
            raise NoFreeBlocks(f"all {self.num_blocks} blocks in use")
        block, _ = self._free.popitem(last=False)
        if self.on_reuse is not None:
            self.on_reuse(block)
        self.refcount[block] = 1
        return block

    def incref(self, block: int) -> int:
        """Share a block; a free block (cached content) is revived and leaves the free queue."""
        if self.refcount[block] == 0:
            del self._free[block]
        self.refcount[block] += 1
        return self.refcount[block]

    def free(self, block: int) -> int:
        """Drop one reference; at zero the block joins the tail of the free queue. Returns the new count."""
        if self.refcount[block] <= 0:
            raise ValueError(f"block {block} freed more often than allocated")
        self.refcount[block] -= 1
        if self.refcount[block] == 0:
            self._free[block] = None
        return self.refcount[block]

    def check(self) -> None:
        """Assert the invariants (tests call it after random operation sequences)."""
        for b, rc in enumerate(self.refcount):
            assert rc >= 0, (b, rc)
            assert (rc == 0) == (b in self._free), (b, rc)
        assert len(self._free) == sum(1 for rc in self.refcount if rc == 0)


@dataclass
class BlockTable:
    """Logical → physical blocks of one sequence. Slot of token position p: blocks[p // bs] * bs + p % bs."""

    block_size: int
    blocks: list[int] = field(default_factory=list)

    @property
    def capacity(self) -> int:
        return len(self.blocks) * self.block_size

    def blocks_needed(self, n_tokens: int) -> int:
        """Extra blocks required to hold `n_tokens` positions in total."""
        return max(0, -(-n_tokens // self.block_size) - len(self.blocks))


@dataclass
class SeqSlice:
    """One sequence's share of a flattened step: tokens [start, start+n_new) of the row, context after it."""

    start: int
    n_new: int
    context_len: int  # positions stored after this step (cached + new)
    blocks: list[int]


class PagedKVPool:
    """The physical K/V storage: [layers, num_blocks, kv_heads, block_size, head_dim] each for K and V."""

    def __init__(self, n_layers: int, num_blocks: int, n_kv_heads: int, block_size: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> None:
        shape = (n_layers, num_blocks, n_kv_heads, block_size, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.block_size = block_size
        # The runner's CUDA graphs over these addresses (paged_graphs.StepGraphs): they live as long as the pool.
        self.step_graphs = None

    @property
    def num_blocks(self) -> int:
        return self.k.shape[1]

    def nbytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()

    def bytes_per_block(self) -> int:
        """K and V of one block across all layers: block_size tokens' worth of the model's KV bytes."""
        per = self.k[:, 0].numel() * self.k.element_size()
        return 2 * per


class PagedSequence:
    """One sequence on blocks of a pool outside the scheduler (a speculative run's target, a model draft): it can
    roll back. Invariant: its K/V for positions [0, length) sit in `table`, which holds ⌈length / block_size⌉
    blocks between calls (`reserve` adds the blocks a step needs, `truncate` frees those past the new end)."""

    def __init__(self, pool: PagedKVPool, on_close: Callable[[PagedKVPool], None] | None = None) -> None:
        self.pool = pool
        self.allocator = BlockAllocator(pool.num_blocks)
        self.table = BlockTable(pool.block_size)
        self.length = 0
        self._on_close = on_close

    def close(self) -> None:
        """Done with the sequence: its pool goes back to whoever lent it (the runner keeps it, and the CUDA graphs
        captured over it, for the next sequence). Idempotent; the sequence must not be used afterwards."""
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close(self.pool)

    @property
    def capacity(self) -> int:
        return self.pool.num_blocks * self.pool.block_size

    def reserve(self, n_new: int) -> SeqSlice:
        """Blocks for `n_new` more positions; the step's slice (its tokens start at row 0)."""
        end = self.length + n_new
        if end > self.capacity:
            raise ValueError(f"sequence full: {end} positions > capacity {self.capacity}")
        for _ in range(self.table.blocks_needed(end)):
            self.table.blocks.append(self.allocator.allocate())
        return SeqSlice(0, n_new, end, self.table.blocks)

    def truncate(self, length: int) -> None:
        """Forget positions ≥ length (rejected guesses); their blocks return to the pool."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a sequence of {self.length} positions to {length}")
        self.length = length
        keep = -(-length // self.pool.block_size)
        while len(self.table.blocks) > keep:
            self.allocator.free(self.table.blocks.pop())


class PagedBackend:
    """AttentionBackend over a `PagedKVPool` for one flattened step (set by `begin_step`)."""

    def __init__(self, pool: PagedKVPool) -> None:
        self.pool = pool
        self.seqs: list[SeqSlice] = []

    def begin_step(self, seqs: Sequence[SeqSlice]) -> None:
        """Precompute the per-step index tensors once; every layer reuses them."""
        bs = self.pool.block_size
        device = self.pool.k.device
        self.seqs = list(seqs)
        # Slot of every new token (a loop over sequences, vectorised over each one's tokens).
        positions, blocks = [], []
        for s in self.seqs:
            pos = torch.arange(s.context_len - s.n_new, s.context_len)
            positions.append(pos)
            blocks.append(torch.tensor(s.blocks[: -(-s.context_len // bs)], dtype=torch.long)[pos // bs])
        pos = torch.cat(positions) if positions else torch.empty(0, dtype=torch.long)
        self.n_total = len(pos)
        self.slot_block = (torch.cat(blocks) if blocks else pos).to(device)
        self.slot_offset = (pos % bs).to(device)
        decode = [s for s in self.seqs if s.n_new == 1 and s.context_len > 1]
        self.prefills = [s for s in self.seqs if not (s.n_new == 1 and s.context_len > 1)]
        self.decode_rows = torch.tensor([s.start for s in decode], dtype=torch.long, device=device)
        if decode:
            width = max(-(-s.context_len // bs) for s in decode)
            table = [s.blocks[: -(-s.context_len // bs)] for s in decode]
            table = [t + [t[0]] * (width - len(t)) for t in table]  # pad with a valid id; masked below
            self.decode_table = torch.tensor(table, dtype=torch.long, device=device)
            lens = torch.tensor([s.context_len for s in decode], device=device)
            cols = torch.arange(width * bs, device=device)
            self.decode_mask = (cols.unsqueeze(0) < lens.unsqueeze(1))[:, None, None, :]  # [Bd, 1, 1, W]
        else:
            self.decode_table = None

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # q: [1, Hq, N, D]; k, v: [1, Hkv, N, D] for the N new tokens of all sequences.
        kc, vc = self.pool.k[layer], self.pool.v[layer]  # [NB, Hkv, BS, D]
        kc[self.slot_block, :, self.slot_offset] = k[0].transpose(0, 1)  # [N, Hkv, D] into their slots
        vc[self.slot_block, :, self.slot_offset] = v[0].transpose(0, 1)
        out = torch.empty_like(q)
        if self.decode_table is not None:
            bd, width = self.decode_table.shape
            hkv, bs, d = kc.shape[1], kc.shape[2], kc.shape[3]
            # One gather for every decode sequence: [Bd, W, Hkv, BS, D] → [Bd, Hkv, W·BS, D].
            kg = kc[self.decode_table].transpose(1, 2).reshape(bd, hkv, width * bs, d)
            vg = vc[self.decode_table].transpose(1, 2).reshape(bd, hkv, width * bs, d)
            qd = q[0, :, self.decode_rows].transpose(0, 1).unsqueeze(2)  # [Bd, Hq, 1, D]
            od = torch.nn.functional.scaled_dot_product_attention(
                qd, kg, vg, attn_mask=self.decode_mask, enable_gqa=True)
            out[0, :, self.decode_rows] = od.squeeze(2).transpose(0, 1)
        for s in self.prefills:
            end = s.start + s.n_new
            qs = q[:, :, s.start:end]
            if s.context_len == s.n_new:  # nothing cached before: attend over the new keys directly
                ks, vs = k[:, :, s.start:end], v[:, :, s.start:end]
            else:  # cached prefix (prefix-cache hit or recompute): read the whole context through the table
                n_blk = -(-s.context_len // self.pool.block_size)
                ids = torch.tensor(s.blocks[:n_blk], dtype=torch.long, device=kc.device)
                ks = gather_context(kc, ids, s.context_len)
                vs = gather_context(vc, ids, s.context_len)
            out[:, :, s.start:end] = sdpa(qs, ks, vs)
        return out

    def advance(self, n_tokens: int) -> None:
        if n_tokens != self.n_total:
            raise ValueError(f"forward fed {n_tokens} tokens but the step declared {self.n_total}")


def gather_context(cache_layer: torch.Tensor, block_ids: torch.Tensor, length: int) -> torch.Tensor:
    """[NB, Hkv, BS, D] pool layer + block ids → [1, Hkv, length, D] contiguous K (or V) of one sequence."""
    nb, hkv, bs, d = len(block_ids), cache_layer.shape[1], cache_layer.shape[2], cache_layer.shape[3]
    return cache_layer[block_ids].transpose(0, 1).reshape(1, hkv, nb * bs, d)[:, :, :length]
