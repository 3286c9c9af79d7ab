"""FlashAttention's idea in plain PyTorch: tiled attention with an online softmax, next to the naive one (the
flash-attention lesson's arithmetic, flash_attention.py; the engine never runs it).

`naive_attention` materializes the full [Tq, Tk] score matrix per head, as a textbook implementation does.
`tiled_attention` walks key/value blocks for each query block and keeps only a running max `m`, a running
softmax denominator `l` and an unnormalized output accumulator per query row, so the largest score tensor
alive at any time is one [block_q, block_k] tile. The two are mathematically identical (tested against each
other and against PyTorch's SDPA); this is the algorithm, not the fused on-chip GPU kernel (Dao 2023).

Shapes follow the engine: q [B, Hq, Tq, D], k/v [B, Hkv, Tk, D] with Hq a multiple of Hkv (GQA). With
causal masking the Tq queries are the last Tq positions of the Tk keys (query i sees keys ≤ Tk − Tq + i).
Imported inside `run` (and by the tests and bench/flash_attention.py): the web process never loads torch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from inference_core.model.kv_cache import causal_mask


@dataclass(frozen=True)
class TileStats:
    """What the tiled pass touched: tiles computed/skipped and the size of its largest score tile."""

    block_q: int
    block_k: int
    tiles_computed: int
    tiles_skipped: int  # blocks entirely above the causal diagonal: never loaded
    tile_bytes: int  # the largest score tile alive: [B, Hq, block_q, block_k] in the compute dtype


def _expand_kv(k: torch.Tensor, v: torch.Tensor, n_q_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """GQA: query head h reads KV head h // (Hq / Hkv) — repeat each KV head for its group of query heads."""
    group = n_q_heads // k.shape[1]
    if group * k.shape[1] != n_q_heads:
        raise ValueError(f"{n_q_heads} query heads are not a multiple of {k.shape[1]} KV heads")
    return k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True
                    ) -> tuple[torch.Tensor, int]:
    """softmax(q kᵀ / √d) v with the whole score matrix in memory. Returns (out, bytes of that matrix)."""
    k, v = _expand_kv(k, v, q.shape[1])
    tq, tk = q.shape[2], k.shape[2]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # [B, Hq, Tq, Tk]: the N×N matrix
    if causal:
        scores = scores.masked_fill(~causal_mask(tq, tk, q.device), float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return probs @ v, scores.numel() * scores.element_size()


def tiled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                    block_q: int = 64, block_k: int = 64) -> tuple[torch.Tensor, TileStats]:
    """Exact attention one [block_q, block_k] tile at a time (online softmax). Invariant after key blocks 0..j of a
    query block: m = max score seen per row, l = Σ exp(score − m), acc = Σ exp(score − m) · v; a new block with a
    larger max rescales l and acc by exp(m_old − m_new), so the final acc / l equals the full softmax-weighted sum."""
    if block_q < 1 or block_k < 1:
        raise ValueError("block sizes must be positive")
    k, v = _expand_kv(k, v, q.shape[1])
    b, h, tq, d = q.shape
    tk = k.shape[2]
    offset = tk - tq  # causal: query row i sits at absolute position offset + i
    scale = 1.0 / math.sqrt(d)
    out = torch.empty_like(q)
    computed = skipped = 0
    for qs in range(0, tq, block_q):
        qe = min(qs + block_q, tq)
        q_blk = q[:, :, qs:qe] * scale
        m = torch.full((b, h, qe - qs, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((b, h, qe - qs, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((b, h, qe - qs, d), dtype=q.dtype, device=q.device)
        for ks in range(0, tk, block_k):
            ke = min(ks + block_k, tk)
            if causal and ks > offset + qe - 1:  # every key in this block is after every query: all masked
                skipped += 1
                continue
            computed += 1
            s = q_blk @ k[:, :, ks:ke].transpose(-1, -2)  # one tile of scores
            if causal and ke - 1 > offset + qs:  # the tile crosses the diagonal: mask its upper part
                rows = torch.arange(qs, qe, device=q.device).unsqueeze(1) + offset
                cols = torch.arange(ks, ke, device=q.device).unsqueeze(0)
                s = s.masked_fill(cols > rows, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            p = torch.exp(s - m_new)
            correction = torch.exp(m - m_new)  # exp(-inf) = 0 on the first block
            l = l * correction + p.sum(dim=-1, keepdim=True)
            acc = acc * correction + p @ v[:, :, ks:ke]
            m = m_new
        out[:, :, qs:qe] = acc / l
    tile_bytes = b * h * min(block_q, tq) * min(block_k, tk) * q.element_size()
    return out, TileStats(block_q, block_k, computed, skipped, tile_bytes)


def hbm_traffic(n: int, head_dim: int, bytes_per_value: int, block_q: int) -> tuple[int, int]:
    """Bytes read + written to main memory for one head of N×N causal-free attention, (naive, tiled). Naive: QKᵀ
    reads Q, K and writes S (N²); softmax reads S, writes P (2N²); PV reads P and V, writes O. Tiled (query-block
    outer loop): Q read and O written once; K and V re-read once per query block; scores never leave the tile.
    Counts values × bytes; ignores caches, which is the point of the model."""
    nd = n * head_dim
    naive = 4 * n * n + 4 * nd
    n_q_blocks = math.ceil(n / block_q)
    tiled = 2 * nd + 2 * nd * n_q_blocks
    return naive * bytes_per_value, tiled * bytes_per_value
