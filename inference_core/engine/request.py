"""A request's state as the scheduler keeps it, and one step's scheduled batch (what the runner runs)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal, Protocol

import torch

from ..model.sampling import SamplingParams
from .paged import BlockTable, StepRows


class Speculation(Protocol):
    """What makes a request speculative (speculative/decode.py's `SpecDecoding`; the engine never imports it):
    `begin`, then per step `propose` (the draft phase) and `judge` (the verify's logits), then `release`."""
    k: int  # guesses per round at most

    def begin(self, req: "Request") -> None: ...
    def propose(self, req: "Request", k: int) -> list[int]: ...
    def judge(self, req: "Request", drafted: list[int], logits: torch.Tensor, eos: int,
              step_s: float) -> tuple[int, list[int]]: ...
    def release(self) -> None: ...


@dataclass
class Request:
    request_id: str
    prompt_ids: list[int]
    params: SamplingParams = field(default_factory=SamplingParams)
    # state, owned by the scheduler
    output_ids: list[int] = field(default_factory=list)
    status: Literal["new", "waiting", "running", "finished"] = "new"
    finish_reason: str | None = None
    table: BlockTable | None = None
    num_computed: int = 0  # positions whose K/V are in the table
    num_cached_tokens: int = 0  # prefix-cache hit tokens at first admission
    block_hashes: list[bytes] = field(default_factory=list)
    num_preemptions: int = 0
    arrival_time: float = 0.0
    first_scheduled_time: float | None = None
    token_times: list[float] = field(default_factory=list)
    finished_time: float | None = None
    generator: torch.Generator | None = None
    spec: Speculation | None = None  # speculative decoding: drafted and verified in the same steps as the rest
    drafted: list[int] = field(default_factory=list)  # this step's guesses (the draft phase), owned by the scheduler
    chooser: Callable[..., int] | None = None  # replaces `sample`, same arguments: a student's sampler, a grammar mask
    choice: dict | None = None  # the last token's `sampling_step` fields (params.trace_top), set by the runner

    @property
    def all_ids(self) -> list[int]:
        return self.prompt_ids + self.output_ids

    def verifies(self, computed: int) -> bool:
        """A speculative request verifies in every step (its first one is also its prefill)."""
        return self.spec is not None and computed < len(self.prompt_ids) + len(self.output_ids)

    def new_tokens(self, computed: int) -> int:
        """Positions a step feeds, `computed` of the tokens having K/V: every one left, and a speculative request's
        guesses of this step."""
        left = len(self.prompt_ids) + len(self.output_ids) - computed
        return left + len(self.drafted) if self.spec is not None else left


@dataclass
class ScheduledBatch(StepRows):
    """A scheduler step: `requests[j]` owns slice j with `n_new[j]` new tokens and `n_rows[j]` logits rows
    (1, or a verify's k+1; `drafted[j]`: the guesses it checks, None when not a verify)."""
    requests: list[Request] = field(default_factory=list)
    n_new: list[int] = field(default_factory=list)
    n_rows: list[int] = field(default_factory=list)
    drafted: list[list[int] | None] = field(default_factory=list)
