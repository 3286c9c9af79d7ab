"""The exercises, one module each (listed here, not discovered: adding one is a line in this file)."""
from __future__ import annotations

from . import (batch_scheduler, decode_bandwidth, kv_budget, kv_bytes, online_softmax, paged_blocks, prefix_hits,
               roofline, sampler, serving_metrics, speculative, token_cost)
from . import draft_proposer  # with the sampler, the exercises whose passing code drives a live run
from . import heavy_hitters  # long context: H2O's eviction choice
from . import grammar_mask  # structured output: the grammar's token mask
from . import tp_shards  # model parallelism: a matmul's shards and the collective that joins them
from . import gguf_block  # the local ecosystem: a GGUF block dequantized from its bytes
from .base import Case, Exercise

EXERCISES: dict[str, Exercise] = {
    module.EXERCISE.id: module.EXERCISE for module in (
        kv_bytes, speculative, paged_blocks, sampler, roofline, draft_proposer,  # the five, and a draft
        batch_scheduler, online_softmax, decode_bandwidth, prefix_hits, serving_metrics,  # one per remaining module
        heavy_hitters,  # long context
        kv_budget,  # attention variants
        token_cost,  # what a token costs
        grammar_mask,  # structured output
        tp_shards,  # model parallelism
        gguf_block)  # the local ecosystem
}


def get(exercise_id: str) -> Exercise | None:
    return EXERCISES.get(exercise_id)


__all__ = ["Case", "EXERCISES", "Exercise", "get"]
