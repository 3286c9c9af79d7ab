"""A request's state as the scheduler keeps it, and one step's scheduled batch (what the runner runs)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch

from ..model.sampling import SamplingParams
from .paged import BlockTable, SeqSlice


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

    @property
    def all_ids(self) -> list[int]:
        return self.prompt_ids + self.output_ids


@dataclass
class StepRows:
    """One forward's new tokens, flattened (what `ModelRunner.forward_batch` runs): token i sits at `positions[i]`
    of sequence `seq[i]`, whose share of the row and blocks are `slices[seq[i]]`; logits are computed at `rows`."""

    tokens: list[int]
    positions: list[int]
    seq: list[int]
    rows: list[int]
    slices: list[SeqSlice]

    @property
    def tables(self) -> list[list[int]]:
        """Each sequence's blocks, padded to one width."""
        width = max(len(s.blocks) for s in self.slices)
        return [s.blocks + [0] * (width - len(s.blocks)) for s in self.slices]


@dataclass
class ScheduledBatch(StepRows):
    """A scheduler step: `requests[j]` owns slice j and gets `n_new[j]` new tokens; `rows` are each request's last
    new token (the only rows whose logits are sampled)."""

    requests: list[Request] = field(default_factory=list)
    n_new: list[int] = field(default_factory=list)
