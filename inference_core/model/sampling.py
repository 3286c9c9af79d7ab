"""Next-token choice: greedy, temperature, top-k, top-p — as a distribution first, then a draw."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    """What one request asks for: how many tokens, when to stop, and how each is picked."""

    temperature: float = 0.0  # 0 → greedy (argmax)
    top_k: int = 0  # 0 → off
    top_p: float = 1.0  # 1 → off
    seed: int | None = None  # a seeded generator per request: the same draws whatever else is batched
    max_new_tokens: int = 32
    stop_at_eos: bool = True

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def generator(self) -> torch.Generator | None:
        return torch.Generator().manual_seed(self.seed) if self.seed is not None else None


def probabilities(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Distribution over the vocabulary (last dim) after temperature, top-k and top-p filtering."""
    logits = logits.float()
    if params.greedy:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).to(torch.float32)
    logits = logits / params.temperature
    if params.top_k and params.top_k < logits.shape[-1]:
        kth = torch.topk(logits, params.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if params.top_p < 1.0:
        sorted_p, order = torch.sort(probs, dim=-1, descending=True)
        cumulative = sorted_p.cumsum(-1)
        drop = cumulative - sorted_p > params.top_p  # keep the smallest prefix whose mass reaches top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None = None) -> int:
    """One token id from logits of shape [vocab]."""
    if params.greedy:
        return int(logits.argmax(-1))
    probs = probabilities(logits, params)
    return int(torch.multinomial(probs.cpu(), 1, generator=generator))
