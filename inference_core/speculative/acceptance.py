"""The acceptance rule: keep a drafted token with probability min(1, q/p), else draw from the residual, so every
emitted token is distributed exactly as the target's q (see decode.py's docstring for the notation)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

@dataclass
class Verdict:
    n_accepted: int
    next_token: int
    next_kind: str
    p_draft: list[float]
    q_target: list[float]
    accept_prob: list[float]
    uniform: list[float | None]
    outcome: list[str]
    target_argmax: list[int]  # q's top token at each of the k+1 positions


def _draw(dist: torch.Tensor, generator: torch.Generator | None) -> int:
    return int(torch.multinomial(dist.cpu(), 1, generator=generator))


def accept(drafted: list[int], p: torch.Tensor | None, q: torch.Tensor, greedy: bool,
           generator: torch.Generator | None = None) -> Verdict:
    """Rejection-sample the k `drafted` tokens against the target: p [k, V] the draft's distributions (None: one-hot),
    q [k+1, V] the target's (row i scores the token after drafted[:i]). Greedy: accept while drafted[i] == argmax q_i,
    then emit argmax q_m — the one-hot special case."""
    k = len(drafted)
    idx = torch.tensor(drafted, dtype=torch.long)
    top = q.argmax(-1).tolist()  # one device → host copy for the round (on a GPU each int() would sync)
    if greedy:  # q may be raw logits here; the one-hot values are what the rule uses
        q_tok = [float(d == top[i]) for i, d in enumerate(drafted)]
        p_tok = [1.0] * k
    else:
        q_tok = q[torch.arange(k), idx].tolist() if k else []
        p_tok = p[torch.arange(k), idx].tolist() if (k and p is not None) else [1.0] * k
    ratio = [min(1.0, qi / pi) if pi > 0 else 0.0 for pi, qi in zip(p_tok, q_tok)]
    uniform: list[float | None] = [None] * k
    outcome = ["not_reached"] * k
    for i in range(k):
        if greedy:
            ok = drafted[i] == top[i]
        else:
            r = float(torch.rand((), generator=generator))
            uniform[i] = r
            ok = r < ratio[i]
        if ok:
            outcome[i] = "accepted"
            continue
        outcome[i] = "rejected"
        if greedy:
            nxt = top[i]
        else:
            p_i = p[i] if p is not None else torch.nn.functional.one_hot(idx[i], q.shape[-1]).to(q.device, q.dtype)
            residual = (q[i] - p_i).clamp_min(0.0)
            total = float(residual.sum())
            # total > 0 whenever a rejection is possible (q ≠ p); guard float round-off anyway
            nxt = _draw(residual / total if total > 0 else q[i], generator)
        return Verdict(i, nxt, "residual", p_tok, q_tok, ratio, uniform, outcome, top)
    nxt = top[k] if greedy else _draw(q[k], generator)
    return Verdict(k, nxt, "bonus", p_tok, q_tok, ratio, uniform, outcome, top)


