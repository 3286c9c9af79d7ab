"""FlashAttention's idea in plain PyTorch: tiled attention with an online softmax, next to the naive one."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..model.kv_cache import causal_mask


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
    """Exact attention one [block_q, block_k] tile at a time (online softmax)."""
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
    """Bytes read + written to main memory for one head of N×N causal-free attention, (naive, tiled)."""
    nd = n * head_dim
    naive = 4 * n * n + 4 * nd
    n_q_blocks = math.ceil(n / block_q)
    tiled = 2 * nd + 2 * nd * n_q_blocks
    return naive * bytes_per_value, tiled * bytes_per_value
