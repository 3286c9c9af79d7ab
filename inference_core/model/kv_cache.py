"""Attention backends: where K/V live between steps."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F


class AttentionBackend(Protocol):
    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q: [B, Hq, T, D]; k, v: [B, Hkv, T, D] for the T new tokens. Returns [B, Hq, T, D]."""
        ...

    def advance(self, n_tokens: int) -> None:
        """Called once per forward, after every layer has attended: the T new tokens are now stored."""
        ...


def causal_mask(t_new: int, t_total: int, device: torch.device) -> torch.Tensor:
    """Boolean [t_new, t_total]: new token i (absolute position t_total − t_new + i) sees keys ≤ itself."""
    offset = t_total - t_new
    rows = torch.arange(t_new, device=device).unsqueeze(1) + offset
    cols = torch.arange(t_total, device=device).unsqueeze(0)
    return cols <= rows


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention of the last q.shape[2] positions over all of k/v (GQA by head grouping)."""
    t_new, t_total = q.shape[2], k.shape[2]
    if t_new == 1:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    if t_new == t_total:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    mask = causal_mask(t_new, t_total, q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


class NoCache:
    """Attends over exactly the tokens passed in: the caller re-feeds the whole sequence each step."""

    def attend(self, layer, q, k, v):
        return sdpa(q, k, v)

    def advance(self, n_tokens: int) -> None:
        pass


@dataclass
class KVCache:
    """Contiguous cache. Invariant: positions [0, length) hold valid K/V in every layer."""

    k: torch.Tensor  # [layers, batch, kv_heads, capacity, head_dim]
    v: torch.Tensor
    length: int = 0

    @classmethod
    def allocate(cls, n_layers: int, batch: int, n_kv_heads: int, capacity: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device | str) -> "KVCache":
        shape = (n_layers, batch, n_kv_heads, capacity, head_dim)
        return cls(torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))

    @property
    def capacity(self) -> int:
        return self.k.shape[3]

    def attend(self, layer, q, k, v):
        start, t_new = self.length, k.shape[2]
        end = start + t_new
        if end > self.capacity:
            raise ValueError(f"KV cache full: {end} tokens > capacity {self.capacity}")
        self.k[layer, :, :, start:end] = k
        self.v[layer, :, :, start:end] = v
        return sdpa(q, self.k[layer, :, :, :end], self.v[layer, :, :, :end])

    def advance(self, n_tokens: int) -> None:
        self.length += n_tokens

    def truncate(self, length: int) -> None:
        """Forget positions ≥ length (speculative decoding's rollback); stale values are overwritten later."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a cache of {self.length} tokens to {length}")
        self.length = length
