"""Trace events of the batching scheduler and the paged KV pool (documented in docs/trace-schema/paged.md)."""
from __future__ import annotations

import typing

from .trace import TraceEvent, event


@event("batch_run_started")
class BatchRunStarted(TraceEvent):
    model: str
    mode: typing.Literal["continuous", "static"]
    block_size: int
    num_blocks: int
    max_num_seqs: int
    max_num_batched_tokens: int
    prefix_caching: bool
    n_layers: int
    kv_bytes_per_token: int
    kv_bytes_per_block: int


@event("request_queued")
class RequestQueued(TraceEvent):
    request_id: str
    step: int
    t_s: float
    prompt_len: int
    max_new_tokens: int


@event("kv_block")
class KVBlock(TraceEvent):
    """One block operation (`op`: docs/engine-notes.md, `KVBlock`); `refcount` is the count after it."""
    op: typing.Literal["allocated", "shared", "freed", "cached", "evicted"]
    block: int
    request_id: str | None
    logical_index: int | None
    refcount: int
    step: int


@event("preemption")
class Preemption(TraceEvent):
    """`request_id` was evicted back to the waiting queue (recompute): its blocks are freed, its tokens kept."""
    request_id: str
    step: int
    blocks_freed: int
    tokens_to_recompute: int


@event("batch_step")
class BatchStep(TraceEvent):
    """One batched forward: an entry per scheduled request, `idle` the static batch's finished members (the
    entries' keys: docs/engine-notes.md, `BatchStep`)."""
    step: int
    t_s: float
    duration_s: float
    entries: list[dict]
    idle: list[str]
    n_tokens: int
    running: int
    waiting: int
    blocks_used: int
    blocks_free: int
    blocks_cached: int
    kv_usage: float  # used blocks / all blocks (vLLM kv_cache_usage_perc, as a fraction)
    kv_slots_allocated: int  # block_size × used blocks (each physical block once)
    kv_slots_filled: int  # of those, slots holding a token's K/V
    contiguous_slots_reserved: int  # what reserving prompt + max_new_tokens per live request would hold


@event("request_finished")
class RequestFinished(TraceEvent):
    """Per-request metrics with vLLM's definitions (seconds): ttft, e2e, tpot, itl, queue."""
    request_id: str
    token_ids: list[int]
    text: str
    finish_reason: typing.Literal["length", "eos", "aborted"]
    n_prompt_tokens: int
    n_cached_tokens: int
    n_generated: int
    num_preemptions: int
    arrival_s: float
    first_token_s: float | None
    finished_s: float
    ttft_s: float | None
    tpot_s: float
    e2e_s: float
    queue_s: float | None
    itl_s: list[float]


@event("batch_run_finished")
class BatchRunFinished(TraceEvent):
    """Run metrics (see `scheduler.run_metrics` for every key's definition)."""
    metrics: dict
