"""Adaptive draft length: k follows one request's acceptance, round by round (pure; `SpecDecoding` asks it).

Invariant: 0 ≤ `next_k()` ≤ cap. A fully accepted round doubles k (up to cap); any other round sets k to the larger
of half of it and the accepted count + 1. `rate` estimates the chance that a guess is accepted (accepted guesses over
accepted guesses + rejections, older rounds weighing `decay` less each round); a rejection that leaves it below
`min_rate` stops drafting for `pause` rounds (plain decode steps), after which a round drafts again as a probe. Each
pause doubles the next (up to `max_pause`), each round with an accepted guess halves it (down to the first pause).
A round that drafted nothing only counts the pause down.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AdaptiveK:
    cap: int = 16
    k: int = 4
    min_rate: float = 0.25  # about where a guess stops paying for its wider verify (n-gram, CPU)
    decay: float = 0.8
    pause: int = 2
    max_pause: int = 32
    idle: int = 0  # rounds left without drafting
    accepted: float = 1.0  # decayed counts behind `rate` (one accepted guess to start: optimistic)
    rejected: float = 0.0
    first_pause: int = field(init=False)

    def __post_init__(self) -> None:
        if self.cap < 1 or self.k < 1 or self.pause < 1:
            raise ValueError("adaptive k needs cap, k and pause ≥ 1")
        self.k, self.first_pause = min(self.k, self.cap), self.pause

    @property
    def rate(self) -> float:
        return self.accepted / (self.accepted + self.rejected)

    def next_k(self) -> int:
        return 0 if self.idle else self.k

    def update(self, drafted: int, accepted: int) -> None:
        if drafted == 0:
            self.idle = max(0, self.idle - 1)
            return
        full = accepted == drafted
        self.accepted = self.decay * self.accepted + accepted
        self.rejected = self.decay * self.rejected + (not full)
        self.k = min(self.cap, 2 * self.k) if full else max(accepted + 1, self.k // 2)
        if accepted:
            self.pause = max(self.first_pause, self.pause // 2)
        if not full and self.rate < self.min_rate:
            self.idle, self.pause = self.pause, min(self.max_pause, 2 * self.pause)
