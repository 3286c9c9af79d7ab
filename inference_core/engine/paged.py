"""Paged KV cache: fixed-size blocks, a block allocator, per-sequence block tables, paged attention."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F


class NoFreeBlocks(RuntimeError):
    """The pool is exhausted; the scheduler answers by preempting a sequence."""


class BlockAllocator:
    """Free list + reference counts over block ids. Invariant: a block is free iff its refcount is 0 (LRU order)."""

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


@dataclass
class BlockTable:
    """Logical → physical blocks of one sequence. Slot of token position p: blocks[p // bs] * bs + p % bs."""
    block_size: int
    blocks: list[int] = field(default_factory=list)

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


@dataclass
class StepRows:
    """One forward's tokens, flattened: token i at `positions[i]` of sequence `seq[i]`; logits at `rows`."""
    tokens: list[int]
    positions: list[int]
    seq: list[int]
    rows: list[int]
    slices: list[SeqSlice]

    @property
    def tables(self) -> list[list[int]]:
        """Each sequence's blocks, padded to one width."""
        width = max(len(s.blocks) for s in self.slices)
        return [s.blocks + [0] * (width - len(s.blocks)) for s in self.slices]


KV_DTYPES = ("auto", "int8")  # "auto": the model's own dtype
SCALE_DTYPE = torch.float16  # one scale per token and head: 2 bytes beside head_dim int8 values


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] → (int8, fp16 scale [...]): absmax, scale rounded first, so |dequantized − x| ≤ scale / 2."""
    xf = x.float()
    scale = (xf.abs().amax(dim=-1) / 127.0).clamp(2.0 ** -24, 65504.0).to(SCALE_DTYPE)
    q = torch.round(xf / scale.float().unsqueeze(-1)).clamp_(-127, 127).to(torch.int8)
    return q, scale


def dequantize(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """int8 [..., D] and scale [...] → values [..., D] in `dtype` (int8 is exact in bf16 and fp32)."""
    return q.to(dtype) * scale.unsqueeze(-1).to(dtype)


def paged_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tables: torch.Tensor, lens: torch.Tensor,
                    k_scale: torch.Tensor | None = None, v_scale: torch.Tensor | None = None) -> torch.Tensor:
    """Attention through block tables, in torch (every torch path's): q [B, Hq, T, D] over a layer's pool
    [NB, Hkv, BS, D] via tables [B, W]; query t of b sees positions < lens[b, t]. Fixed shapes: graph-capturable."""
    b, w = tables.shape
    hkv, bs, d = k.shape[1:]
    kg, vg = k[tables], v[tables]
    if k_scale is not None:
        kg, vg = dequantize(kg, k_scale[tables], q.dtype), dequantize(vg, v_scale[tables], q.dtype)
    kg = kg.transpose(1, 2).reshape(b, hkv, w * bs, d)
    vg = vg.transpose(1, 2).reshape(b, hkv, w * bs, d)
    mask = torch.arange(w * bs, device=q.device) < lens.unsqueeze(-1)  # [B, T, W·BS]
    return F.scaled_dot_product_attention(q, kg, vg, attn_mask=mask.unsqueeze(1), enable_gqa=True)


class PagedKVPool:
    """K/V storage [layers, blocks, kv_heads, block_size, head_dim]: the model's dtype, or int8 + per-token scales."""

    def __init__(self, n_layers: int, num_blocks: int, n_kv_heads: int, block_size: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
                 kv_dtype: str = "auto") -> None:
        if kv_dtype not in KV_DTYPES:
            raise ValueError(f"kv_dtype must be one of {KV_DTYPES}, not {kv_dtype!r}")
        shape = (n_layers, num_blocks, n_kv_heads, block_size, head_dim)
        self.kv_dtype = kv_dtype
        store = torch.int8 if kv_dtype == "int8" else dtype
        self.k = torch.zeros(shape, dtype=store, device=device)
        self.v = torch.zeros(shape, dtype=store, device=device)
        self.k_scale = self.v_scale = None
        if kv_dtype == "int8":
            self.k_scale = torch.zeros(shape[:-1], dtype=SCALE_DTYPE, device=device)
            self.v_scale = torch.zeros(shape[:-1], dtype=SCALE_DTYPE, device=device)
        self.block_size = block_size
        # The runner's CUDA graphs over these addresses (paged_graphs.StepGraphs): they live as long as the pool.
        self.step_graphs = None

    @property
    def quantized(self) -> bool:
        return self.k_scale is not None

    @property
    def num_blocks(self) -> int:
        return self.k.shape[1]

    @property
    def capacity_tokens(self) -> int:
        return self.num_blocks * self.block_size

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.k, self.v, self.k_scale, self.v_scale) if t is not None)

    def bytes_per_block(self) -> int:
        """K and V of one block across all layers (scales included): block_size tokens' worth of KV bytes."""
        return self.nbytes() // self.num_blocks

    def bytes_per_token(self) -> int:
        """What one cached token costs across all layers, scales included."""
        return self.bytes_per_block() // self.block_size

    def write(self, layer: int, blocks: torch.Tensor, offsets: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """K and V rows [N, Hkv, D] of N new tokens into their slots (block, offset) of `layer`."""
        if self.quantized:
            (k, ks), (v, vs) = quantize_rows(k), quantize_rows(v)
            self.k_scale[layer][blocks, :, offsets] = ks
            self.v_scale[layer][blocks, :, offsets] = vs
        self.k[layer][blocks, :, offsets] = k
        self.v[layer][blocks, :, offsets] = v


def pool_bytes_per_token(n_layers: int, n_kv_heads: int, head_dim: int, dtype: torch.dtype,
                         kv_dtype: str = "auto") -> int:
    """`PagedKVPool.bytes_per_token` without allocating one (a one-slot pool on the meta device)."""
    return PagedKVPool(n_layers, 1, n_kv_heads, 1, head_dim, dtype, "meta", kv_dtype).bytes_per_token()


class PagedSequence:
    """A sequence on its own pool, outside the scheduler (a model draft's); it can roll back.
    Invariant: K/V of positions [0, length) sit in `table`, which holds ⌈length / block_size⌉ blocks between calls."""

    def __init__(self, pool: PagedKVPool, on_close: Callable[[PagedKVPool], None] | None = None) -> None:
        self.pool = pool
        self.allocator = BlockAllocator(pool.num_blocks)
        self.table = BlockTable(pool.block_size)
        self.length = 0
        self._on_close = on_close

    def close(self) -> None:
        """Give the pool back to its lender (idempotent); the sequence is not used afterwards."""
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close(self.pool)

    def reserve(self, n_new: int) -> SeqSlice:
        """Blocks for `n_new` more positions; the step's slice (its tokens start at row 0)."""
        end = self.length + n_new
        if end > self.pool.capacity_tokens:
            raise ValueError(f"sequence full: {end} positions > capacity {self.pool.capacity_tokens}")
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
            table = [t + [t[0]] * (width - len(t)) for t in table]  # pad with a valid id; masked out
            self.decode_table = torch.tensor(table, dtype=torch.long, device=device)
            self.decode_lens = torch.tensor([[s.context_len] for s in decode], device=device)  # [Bd, 1]
        else:
            self.decode_table = None

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # q: [1, Hq, N, D]; k, v: [1, Hkv, N, D] for the N new tokens of all sequences.
        pool = self.pool
        pool.write(layer, self.slot_block, self.slot_offset, k[0].transpose(0, 1), v[0].transpose(0, 1))
        out = torch.empty_like(q)
        scales = (pool.k_scale[layer], pool.v_scale[layer]) if pool.quantized else (None, None)
        if self.decode_table is not None:  # every decode sequence in one gather
            qd = q[0, :, self.decode_rows].transpose(0, 1).unsqueeze(2)  # [Bd, Hq, 1, D]
            od = paged_attention(qd, pool.k[layer], pool.v[layer], self.decode_table, self.decode_lens, *scales)
            out[0, :, self.decode_rows] = od.squeeze(2).transpose(0, 1)
        for s in self.prefills:
            end = s.start + s.n_new
            qs = q[:, :, s.start:end]
            if s.context_len == s.n_new and not pool.quantized:  # nothing cached before: the new keys as they are
                out[:, :, s.start:end] = F.scaled_dot_product_attention(
                    qs, k[:, :, s.start:end], v[:, :, s.start:end], is_causal=True, enable_gqa=True)
            else:  # cached prefix, or an int8 pool's rounded keys: read the whole context through the table
                table = torch.tensor([s.blocks[: -(-s.context_len // pool.block_size)]], device=q.device)
                lens = torch.arange(s.context_len - s.n_new + 1, s.context_len + 1, device=q.device)[None]
                out[:, :, s.start:end] = paged_attention(qs, pool.k[layer], pool.v[layer], table, lens, *scales)
        return out

    def advance(self, n_tokens: int) -> None:
        if n_tokens != self.n_total:
            raise ValueError(f"forward fed {n_tokens} tokens but the step declared {self.n_total}")

