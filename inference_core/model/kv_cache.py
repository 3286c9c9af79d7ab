"""Attention backends: where K/V live between steps."""
from __future__ import annotations

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
