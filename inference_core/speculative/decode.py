"""Speculative decoding (Leviathan et al. 2023, arXiv:2211.17192; Chen et al. 2023, arXiv:2302.01318), with
**p = the draft's distribution, q = the target's**. A round is one `LLMEngine.step()`; its cache invariant and the
order of its phases: docs/engine-notes.md."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import torch

from ..engine.request import Request
from ..model.sampling import SamplingParams, probabilities
from .acceptance import accept
from .adaptive import AdaptiveK, CostAwareK
from .drafts import Draft, Proposal
from .events import SpecRound


@dataclass
class SpecStats:
    k: int
    n_prompt_tokens: int = 0
    n_generated: int = 0
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    drafted_at: list[int] = field(init=False)  # per draft position i: rounds that drafted ≥ i+1 tokens
    accepted_at: list[int] = field(init=False)  # … and in which position i was accepted
    target_forwards: int = 0  # verify passes (the first round's prefill not counted; plain decoding: 1 per token)
    draft_forwards: int = 0
    prefill_time_s: float = 0.0
    draft_time_s: float = 0.0
    verify_time_s: float = 0.0
    total_time_s: float = 0.0

    def __post_init__(self) -> None:
        self.drafted_at, self.accepted_at = [0] * self.k, [0] * self.k

    def record(self, n_drafted: int, n_accepted: int, n_draft_forwards: int, draft_s: float, verify_s: float,
               prefill: bool = False) -> None:
        self.rounds += 1
        if prefill:  # the first round's forward is the prompt's prefill, counted apart (as plain decoding's)
            self.prefill_time_s, verify_s = self.prefill_time_s + verify_s, 0.0
        self.target_forwards += not prefill
        self.drafted, self.accepted = self.drafted + n_drafted, self.accepted + n_accepted
        self.draft_forwards, self.draft_time_s = self.draft_forwards + n_draft_forwards, self.draft_time_s + draft_s
        self.verify_time_s += verify_s
        for i in range(n_drafted):
            self.drafted_at[i] += 1
            self.accepted_at[i] += i < n_accepted

    def metrics(self) -> dict:
        """JSON-able summary. `mean_accept_length` = tokens per verify pass = 1 + accepted / rounds."""
        verify_ms = 1000 * self.verify_time_s / max(self.target_forwards, 1)
        draft_ms = 1000 * self.draft_time_s / max(self.draft_forwards, 1) if self.draft_forwards else 0.0
        return {
            **{f.name: getattr(self, f.name) for f in fields(self) if f.init},  # the counts and times as kept
            "acceptance_rate": self.accepted / self.drafted if self.drafted else 0.0,
            "acceptance_by_position": [a / d if d else None for a, d in zip(self.accepted_at, self.drafted_at)],
            "drafted_by_position": list(self.drafted_at),
            "mean_accept_length": 1 + self.accepted / self.rounds if self.rounds else 0.0,
            "target_forwards_per_token": self.target_forwards / self.n_generated if self.n_generated else 0.0,
            "draft_ms_per_forward": draft_ms, "verify_ms_per_forward": verify_ms,
            "draft_cost_ratio": draft_ms / verify_ms if verify_ms else 0.0,
            "tokens_per_s": self.n_generated / self.total_time_s if self.total_time_s else 0.0,
        }


@dataclass(frozen=True)
class SpecParams(SamplingParams):
    k: int = 4  # guesses per round (adaptive: at most)
    adaptive: bool = False  # k chosen per round by a policy (adaptive.py), k its cap
    policy: str = "cost"  # adaptive: 'cost' (CostAwareK: most tokens per unit of time) or 'acceptance' (AdaptiveK)


class SpecDecoding:
    """What makes a `Request` speculative: its draft, the acceptance rule and its rounds' record (`SpecRound`s wait
    for `take_rounds()`). The step drives it; nothing here runs the target. A `policy` picks each round's k ≤ k."""

    def __init__(self, draft: Draft, k: int, token_text: Callable[[int], str] = str,
                 policy: AdaptiveK | CostAwareK | None = None) -> None:
        if k < 0:
            raise ValueError("k must be ≥ 0")
        self.draft, self.k, self.token_text, self.policy = draft, k, token_text, policy
        self.stats = SpecStats(k)
        self.rounds: list[SpecRound] = []
        self.n_rounds = 0
        self.proposal: Proposal | None = None  # this round's guesses with the draft's distributions
        self.t_start = time.perf_counter()

    def begin(self, req: Request) -> None:
        capacity = len(req.prompt_ids) + req.params.max_new_tokens + self.k + 1
        self.draft.begin(list(req.prompt_ids), capacity, req.params, req.generator)

    def propose(self, req: Request, k: int) -> list[int]:
        k = min(k, self.policy.next_k()) if self.policy is not None else k
        self.proposal = self.draft.propose(req.all_ids, k) if k > 0 else None
        return self.proposal.tokens[:k] if self.proposal is not None else []

    @torch.inference_mode()
    def judge(self, req: Request, drafted: list[int], logits: torch.Tensor, eos: int,
              step_s: float) -> tuple[int, list[int]]:
        params = req.params
        prop = self.proposal if drafted and self.proposal is not None else Proposal([], None)
        self.proposal = None
        p = prop.p[: len(drafted)] if prop.p is not None else None
        # greedy needs only argmax: skip the softmax (accept() uses one-hot values)
        q = logits.float() if params.greedy else probabilities(logits, params)
        verdict = accept(drafted, p, q, params.greedy, req.generator)
        m = verdict.n_accepted
        verify_s = max(0.0, step_s - prop.time_s)  # the step less this request's draft phase
        no_draft = "" if drafted else "prompt" if not self.n_rounds else "budget" if len(req.output_ids) + 1 >= \
            params.max_new_tokens else "paused" if self.policy is not None and not self.policy.next_k() else "no_guess"
        if self.policy is not None:  # (the first round's forward is the prompt's prefill)
            self.policy.update(len(drafted), m, prop.time_s, verify_s, prop.catch_up_s, prefill=not self.n_rounds)
        emitted = drafted[:m] + [verdict.next_token]
        if params.stop_at_eos and eos in emitted:
            emitted = emitted[: emitted.index(eos) + 1]
        emitted = emitted[: params.max_new_tokens - len(req.output_ids)]
        stats = self.stats
        stats.n_prompt_tokens = len(req.prompt_ids)
        stats.record(len(drafted), m, prop.n_forwards, prop.time_s, verify_s, prefill=not self.n_rounds)
        stats.n_generated = len(req.output_ids) + len(emitted)
        stats.total_time_s = time.perf_counter() - self.t_start
        text = self.token_text
        self.rounds.append(SpecRound(  # the verdict's fields (n_accepted, next_token, p_draft, …) as they are
            round=self.n_rounds, position=len(req.all_ids), drafted=list(drafted), n_draft_forwards=prop.n_forwards,
            drafted_text=[text(t) for t in drafted], emitted=emitted,
            next_text=text(verdict.next_token), draft_time_s=prop.time_s, verify_time_s=verify_s,
            n_generated=stats.n_generated, elapsed_s=stats.total_time_s, no_draft=no_draft, **vars(verdict)))
        self.n_rounds += 1
        return m, emitted

    def release(self) -> None:
        self.draft.close()

    def take_rounds(self) -> list[SpecRound]:
        """The rounds judged since the last call, in order."""
        out, self.rounds = self.rounds, []
        return out
