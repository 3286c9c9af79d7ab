"""Next-token choice: repetition penalty, greedy, temperature, top-k, top-p, min-p — a distribution, then a draw."""
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
    min_p: float = 0.0  # 0 → off; keeps the tokens with at least min_p × the most likely one's probability
    repetition_penalty: float = 1.0  # 1 → off; a token already in the text: logit ÷ it if positive, × it if not
    trace_top: int = 0  # > 0: each token also emits a `sampling_step` event over the trace_top most likely tokens

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    @property
    def plain_argmax(self) -> bool:  # the runner's one argmax over the batch serves it
        return self.greedy and self.repetition_penalty == 1.0 and not self.trace_top

    def generator(self) -> torch.Generator | None:
        return torch.Generator().manual_seed(self.seed) if self.seed is not None else None


def penalized(logits: torch.Tensor, params: SamplingParams, history=()) -> torch.Tensor:
    """Float logits [vocab] after the repetition penalty (CTRL's) on the tokens of `history`."""
    logits, penalty = logits.float(), params.repetition_penalty
    seen = torch.tensor(sorted(set(history)) if penalty != 1.0 else [], dtype=torch.long, device=logits.device)
    return logits.index_copy(0, seen, torch.where(logits[seen] > 0, logits[seen] / penalty, logits[seen] * penalty))


def probabilities(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Distribution over the vocabulary (last dim) after temperature, top-k, top-p and min-p filtering."""
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
    if params.min_p > 0.0:
        probs = probs.masked_fill(probs < params.min_p * probs.amax(-1, keepdim=True), 0.0)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None = None, history=()) -> int:
    """One token id from logits of shape [vocab]; `history`: the ids the repetition penalty counts as seen."""
    logits = penalized(logits, params, history)
    if params.greedy:
        return int(logits.argmax(-1))
    return int(torch.multinomial(probabilities(logits, params).cpu(), 1, generator=generator))


def choice(logits: torch.Tensor, params: SamplingParams, token: int, history=()) -> dict:
    """What `sample` chose `token` from (the `sampling_step` event's fields): the trace_top most likely tokens."""
    logits = penalized(logits, params, history)
    kept = probabilities(logits, params) > 0
    scaled = kept.float() if params.greedy else torch.softmax(logits / params.temperature, -1)
    order = torch.argsort(logits, descending=True, stable=True)
    top = order[:params.trace_top]
    pick = lambda t: [round(float(v), 6) for v in t[top]]  # noqa: E731
    return {"token_id": token, "rank": int((order == token).nonzero()[0, 0]), "top_ids": top.tolist(),
            "logits": pick(logits), "probs": pick(torch.softmax(logits, -1)), "probs_t": pick(scaled),
            "n_kept": int(kept.sum()), "kept_mass": round(float(scaled[kept].sum()), 6)}
