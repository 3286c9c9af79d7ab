"""The trace events of a speculative run (docs/trace-schema/speculative.md)."""
from __future__ import annotations

import typing

from ..engine.trace import TraceEvent, event

NOTATION = "p = draft distribution, q = target distribution (Chen et al. 2023; Leviathan et al. 2023 swap the letters)"


@event("spec_started")
class SpecStarted(TraceEvent):
    model: str
    draft: str
    k: int
    temperature: float
    target_layers: int
    draft_layers: int | None  # None for a draft without a model (n-gram)
    prompt_token_ids: list[int]
    prompt_tokens: list[str]
    notation: str


@event("spec_round")
class SpecRound(TraceEvent):
    """One draft → verify → accept round. Lists over drafted positions have length len(drafted)."""
    round: int
    position: int  # sequence position of the first drafted token
    drafted: list[int]
    drafted_text: list[str]
    p_draft: list[float]  # p_i(d_i): the draft's probability of its own guess (1.0 if deterministic)
    q_target: list[float]  # q_i(d_i): the target's probability of the same token
    accept_prob: list[float]  # min(1, q/p)
    uniform: list[float | None]  # r ~ U(0,1) drawn to decide (None in greedy mode or when not reached)
    outcome: list[typing.Literal["accepted", "rejected", "not_reached"]]
    target_argmax: list[int]  # the target's top token at each of the k+1 verified positions
    n_accepted: int
    next_token: int  # the residual sample (after a rejection) or the bonus token (all accepted)
    next_text: str
    next_kind: typing.Literal["residual", "bonus"]
    emitted: list[int]  # accepted guesses + next_token (cut at max_new_tokens / EOS)
    draft_time_s: float
    verify_time_s: float
    n_draft_forwards: int
    n_generated: int  # tokens emitted so far, this round included
    elapsed_s: float  # since the run started (prefill included)
    no_draft: typing.Literal["", "prompt", "paused", "no_guess", "budget"] = ""  # why `drafted` is empty


@event("spec_finished")
class SpecFinished(TraceEvent):
    token_ids: list[int]
    text: str
    finish_reason: typing.Literal["length", "eos", "cancelled"]
    metrics: dict


