"""Adaptive draft length, per request, round by round (pure policies; `SpecDecoding` asks one): `AdaptiveK` follows
the acceptance alone, `CostAwareK` (below) also weighs what a guess and a wider verify cost.

`AdaptiveK`'s invariant: 0 ≤ `next_k()` ≤ cap. A fully accepted round doubles k (up to cap); any other round sets k to the larger
of half of it and the accepted count + 1. `rate` estimates the chance that a guess is accepted (accepted guesses over
accepted guesses + rejections, older rounds weighing `decay` less each round); a rejection that leaves it below
`min_rate` stops drafting for `pause` rounds (plain decode steps), after which a round drafts again as a probe. Each
pause doubles the next (up to `max_pause`), each round with an accepted guess halves it (down to the first pause).
A round that drafted nothing only counts the pause down.
"""
from __future__ import annotations

import math
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

    def update(self, drafted: int, accepted: int, draft_s: float | None = None, verify_s: float | None = None) -> None:
        if drafted == 0:  # (the timings are CostAwareK's)
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


@dataclass(frozen=True)
class RoundCost:
    """What a round drafting k guesses costs, in plain 1-token decode steps: the verify, a forward over k+1
    positions, costs 1 + first·[k > 0] + per·k (the first extra position moves the forward off the one-row decode
    path); the draft costs `draft`·k (0 for n-gram lookup). Defaults: smollm2-135m fp32 on a 2-core Intel Xeon,
    1 thread (bench/speculative.py's forward over T positions: 1.17× at T = 2, 1.28× at 5, 1.69× at 9)."""

    first: float = 0.15
    per: float = 0.06
    draft: float = 0.0

    def verify(self, k: int) -> float:
        return 1.0 + (self.first if k else 0.0) + self.per * k


@dataclass
class CostAwareK:
    """Cost-aware draft length: each round drafts the k (0 = a plain decode step) with the most expected tokens per
    unit of time. Pure: `next_k()`, then `update()` with the round's outcome and timings.

    Invariant: 0 ≤ `next_k()` ≤ cap. Expected tokens of a round drafting k guesses, when the first guess is accepted
    with probability a and each later one (its predecessors accepted) with probability b:
    E(k) = 1 + a·(1 − b^k)/(1 − b) (a = b: the usual (1 − α^(k+1))/(1 − α)); its cost, in plain steps,
    C(k) = `costs.verify(k)` + r·k, so plain decoding scores E(0)/C(0) = 1 and k is argmax E(k)/C(k). a and b are
    decayed counts (older rounds weigh `decay` less each round) over a `prior` worth `prior_weight` trials; r, a
    guess's draft time over a plain step's, is measured (decayed means of the rounds' draft seconds per guess, and of
    their verify seconds over `costs.verify(k)`), `costs.draft` until both are. A fully accepted round at least
    doubles k (up to cap) if the doubled k still beats plain decoding (an n-gram draft is right in runs); no round
    more than doubles it. When the best k is 0, drafting pauses; the round after
    the pause is a probe (k = 1, as long as the draft has a guess). The pause keeps probes within `budget` of the
    time (a probe's excess cost over a plain step / budget rounds, at least 2); each probe with no accepted guess
    doubles the next pause (up to `max_pause`), any accepted guess sets it back.
    """

    cap: int = 16
    costs: RoundCost = field(default_factory=RoundCost)
    start: int = 4  # the first round's k (the estimates rest on the prior alone) unless drafting does not pay
    prior: float = 0.5  # a guess as likely right as wrong: a draft is tried unless its cost alone rules it out
    prior_weight: float = 1.0  # in rounds; not decayed, so a long run of misses still leaves some hope
    decay: float = 0.8
    budget: float = 0.05
    max_pause: int = 64
    k: int = field(init=False)
    idle: int = field(default=0, init=False)  # plain rounds left before the probe
    pause: int = field(init=False)
    step_s: float | None = field(default=None, init=False)  # a plain step's seconds (decayed mean)
    guess_s: float | None = field(default=None, init=False)  # a guess's draft seconds (decayed mean)
    counts: list[float] = field(default_factory=lambda: [0.0] * 4, init=False)  # first hits, tries; later hits, tries

    def __post_init__(self) -> None:
        if self.cap < 1 or not 0 < self.budget <= 1:
            raise ValueError("cost-aware k needs cap ≥ 1 and 0 < budget ≤ 1")
        self.pause = self.first_pause
        self.k = min(self.start, self.cap) if self.best() else 0
        if self.k == 0:  # the draft's cost alone outweighs what an optimistic guess would save: start plain
            self.idle, self.k = self.pause, 1

    @property
    def first_pause(self) -> int:
        return max(2, math.ceil((self.cost(1) - 1.0) / self.budget))

    def _rate(self, hits: float, tries: float) -> float:
        return (hits + self.prior * self.prior_weight) / (tries + self.prior_weight)

    @property
    def ratio(self) -> float:
        """A guess's draft cost in plain steps: measured, else the cost model's."""
        if self.step_s and self.guess_s is not None:
            return self.guess_s / self.step_s
        return self.costs.draft

    def expected_tokens(self, k: int) -> float:
        a, b = self._rate(*self.counts[:2]), self._rate(*self.counts[2:])
        return 1.0 + (a * k if b >= 1.0 else a * (1.0 - b ** k) / (1.0 - b))

    def cost(self, k: int) -> float:
        return self.costs.verify(k) + self.ratio * k

    def best(self) -> int:
        """argmax over 0..cap of E(k)/C(k); 0 (plain decoding) unless some k beats it."""
        return max(range(self.cap + 1), key=lambda k: (self.expected_tokens(k) / self.cost(k), -k))

    def next_k(self) -> int:
        return 0 if self.idle else self.k

    def update(self, drafted: int, accepted: int, draft_s: float | None = None, verify_s: float | None = None) -> None:
        """One round's outcome: `drafted` guesses, `accepted` of them kept; its draft and verify seconds if timed."""
        mean = lambda old, new: new if old is None else self.decay * old + (1 - self.decay) * new  # noqa: E731
        if verify_s:
            self.step_s = mean(self.step_s, verify_s / self.costs.verify(drafted))
        if drafted == 0:  # a plain step (paused, or the draft had no guess)
            self.idle = max(0, self.idle - 1)
            return
        if draft_s is not None:
            self.guess_s = mean(self.guess_s, draft_s / drafted)
        c = self.counts
        later_tries = min(accepted, drafted - 1)
        c[:] = [self.decay * x for x in c]
        c[0], c[1], c[2], c[3] = c[0] + (accepted > 0), c[1] + 1, c[2] + max(0, accepted - 1), c[3] + later_tries
        doubled = min(self.cap, 2 * self.k)
        best = min(self.best(), doubled)  # one lucky round moves the estimates a lot: k at most doubles
        if accepted == drafted and self.expected_tokens(doubled) > self.cost(doubled):
            best = doubled
        if accepted:
            self.pause = self.first_pause
        if best == 0:
            self.idle, self.k = self.pause, 1
            self.pause = min(self.max_pause, 2 * self.pause)
        else:
            self.k = best
