"""The exercises, one module each (listed here, not discovered: adding one is a line in this file)."""
from __future__ import annotations

from . import kv_bytes, paged_blocks, roofline, sampler, speculative
from .base import Case, Exercise

EXERCISES: dict[str, Exercise] = {
    module.EXERCISE.id: module.EXERCISE for module in (kv_bytes, speculative, paged_blocks, sampler, roofline)
}


def get(exercise_id: str) -> Exercise | None:
    return EXERCISES.get(exercise_id)


__all__ = ["Case", "EXERCISES", "Exercise", "get"]
