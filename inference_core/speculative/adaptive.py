"""Adaptive draft length, per request, round by round (pure policies; `SpecDecoding` asks one): `AdaptiveK` follows
the acceptance alone, `CostAwareK` also weighs what a guess and a wider verify cost. Invariant of both:
0 ≤ `next_k()` ≤ cap. Their rules, step by step: docs/engine-notes.md."""
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

    def update(self, drafted: int, accepted: int, draft_s: float | None = None, verify_s: float | None = None,
               catch_up_s: float = 0.0, prefill: bool = False) -> None:
        if drafted == 0:  # (the timings are CostAwareK's; the prefill round drafts nothing)
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
    """A round of k guesses in plain 1-token decode steps: the verify (k+1 positions) 1 + first·[k > 0] + per·k, the
    draft `draft`·k (0 for n-gram lookup). Defaults measured as docs/engine-notes.md says."""
    first: float = 0.15
    per: float = 0.06
    draft: float = 0.0

    def verify(self, k: int) -> float:
        return 1.0 + (self.first if k else 0.0) + self.per * k


@dataclass
class CostAwareK:
    """Cost-aware draft length: each round drafts the k (0 = a plain decode step) with the most expected tokens per
    unit of time, k = argmax E(k)/C(k) over 0..cap (E(0)/C(0) = 1); 0 ≤ `next_k()` ≤ cap, and no round more than
    doubles k. Pure: `next_k()`, then `update()` with the round's outcome and timings (docs/engine-notes.md)."""
    cap: int = 16
    costs: RoundCost = field(default_factory=RoundCost)
    start: int = 4  # the first round's k (the estimates rest on the prior alone) unless drafting does not pay
    prior: float = 0.5  # a guess as likely right as wrong: a draft is tried unless its cost alone rules it out
    prior_weight: float = 1.0  # in rounds; not decayed, so a long run of misses still leaves some hope
    decay: float = 0.8
    budget: float = 0.02  # the share of the request's time its probes may cost beyond plain steps
    first_pause: int = 2
    max_pause: int = 64
    k: int = field(init=False)
    paused: bool = field(default=False, init=False)
    idle: int = field(default=0, init=False)  # plain rounds left before a probe may run
    pause: int = field(init=False)
    step_s: float | None = field(default=None, init=False)  # a plain step's seconds (decayed mean)
    guess_s: float | None = field(default=None, init=False)  # a guess's draft seconds (decayed mean)
    counts: list[float] = field(default_factory=lambda: [0.0] * 4, init=False)  # first hits, tries; later hits, tries
    prefill_s: float = field(default=0.0, init=False)
    elapsed_s: float = field(default=0.0, init=False)  # the request's rounds so far, its prefill included
    probe_s: float = field(default=0.0, init=False)  # what its probes cost beyond plain steps
    last_probe_s: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.cap < 1 or self.first_pause < 1 or not 0 < self.budget <= 1:
            raise ValueError("cost-aware k needs cap ≥ 1, first_pause ≥ 1 and 0 < budget ≤ 1")
        self.pause = self.first_pause
        self.k = min(self.start, self.cap) if self.best() else 0
        if self.k == 0:  # the draft's cost alone outweighs what an optimistic guess would save: start plain
            self._stop()

    def _stop(self) -> None:
        self.paused, self.idle, self.k = True, self.pause, 1
        self.pause = min(self.max_pause, 2 * self.pause)

    def _rate(self, hits: float, tries: float) -> float:
        return (hits + self.prior * self.prior_weight) / (tries + self.prior_weight)

    @property
    def unit_s(self) -> float:
        return self.step_s or 1.0

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

    def probe_affordable(self) -> bool:
        expected = self.last_probe_s
        if expected is None:
            expected = (self.cost(1) - 1.0) * self.unit_s + self.ratio * self.prefill_s
        return self.probe_s + expected <= self.budget * self.elapsed_s

    def next_k(self) -> int:
        if self.paused and (self.idle or not self.probe_affordable()):
            return 0
        return self.k

    def update(self, drafted: int, accepted: int, draft_s: float | None = None, verify_s: float | None = None,
               catch_up_s: float = 0.0, prefill: bool = False) -> None:
        """One round's outcome: `drafted` guesses, `accepted` of them kept; its draft seconds (`catch_up_s` of them
        re-feeding what the draft skipped) and verify seconds if timed. `prefill`: the round was the prompt's."""
        if prefill:
            self.prefill_s = verify_s or 0.0
            self.elapsed_s += self.prefill_s
            return
        mean = lambda old, new: new if old is None else self.decay * old + (1 - self.decay) * new  # noqa: E731
        if verify_s:
            self.step_s = mean(self.step_s, verify_s / self.costs.verify(drafted))
        if drafted and draft_s is not None and (drafted > 1 or not catch_up_s):  # per guess, as steady drafting
            steady = (draft_s - catch_up_s) / (drafted - 1) if catch_up_s else draft_s / drafted
            self.guess_s = mean(self.guess_s, steady)
        spent = ((draft_s if draft_s is not None else self.ratio * drafted * self.unit_s)
                 + (verify_s if verify_s else self.costs.verify(drafted) * self.unit_s))
        self.elapsed_s += spent
        if drafted == 0:  # a plain step (paused, or the draft had no guess)
            self.idle = max(0, self.idle - 1)
            return
        if self.paused:  # this round was a probe
            self.last_probe_s = max(0.0, spent - self.unit_s)
            self.probe_s += self.last_probe_s
            self.paused = False
        c = self.counts
        later_tries = min(accepted, drafted - 1)
        c[:] = [self.decay * x for x in c]
        c[0], c[1], c[2], c[3] = c[0] + (accepted > 0), c[1] + 1, c[2] + max(0, accepted - 1), c[3] + later_tries
        doubled = min(self.cap, 2 * self.k)
        # one round moves the estimates a lot, and an n-gram draft is right or wrong in runs: k at most doubles,
        # and after a rejection drops to half or to the guesses kept + 1 (AdaptiveK's step), if not further
        best = min(self.best(), doubled if accepted == drafted else max(accepted + 1, self.k // 2))
        if accepted == drafted and self.expected_tokens(doubled) > self.cost(doubled):
            best = doubled
        if accepted:
            self.pause = self.first_pause
        if best == 0:
            self._stop()
        else:
            self.k = best
