"""Adaptive draft length: k follows one request's acceptance, round by round (pure; `SpecDecoding` asks it).

Invariant: 0 ≤ `next_k()` ≤ cap. A fully accepted round doubles k (up to cap); a partly accepted one sets k to the
accepted count + 1; a round that accepted nothing shrinks k to 1, and a second one in a row stops drafting for
`pause` rounds (plain decode steps), after which a one-guess probe may resume it. Each failed probe doubles the
pause (up to `max_pause`), each round with an accepted guess halves it (down to the first pause): a draft right less
than about once in three tries drafts ever more rarely. A round that drafted nothing only counts the pause down.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AdaptiveK:
    cap: int = 16
    k: int = 4
    pause: int = 2
    max_pause: int = 32
    idle: int = 0  # rounds left without drafting
    first_pause: int = field(init=False)

    def __post_init__(self) -> None:
        if self.cap < 1 or self.k < 1 or self.pause < 1:
            raise ValueError("adaptive k needs cap, k and pause ≥ 1")
        self.k, self.first_pause = min(self.k, self.cap), self.pause

    def next_k(self) -> int:
        return 0 if self.idle else self.k

    def update(self, drafted: int, accepted: int) -> None:
        if drafted == 0:
            self.idle = max(0, self.idle - 1)
        elif accepted:
            self.k = min(self.cap, 2 * self.k) if accepted == drafted else accepted + 1
            self.pause = max(self.first_pause, self.pause // 2)
        elif self.k > 1:
            self.k = 1
        else:
            self.idle, self.pause = self.pause, min(self.max_pause, 2 * self.pause)
