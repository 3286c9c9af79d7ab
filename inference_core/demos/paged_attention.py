"""Paged-attention demo: several requests decode together; every block allocation and free is streamed.

The page draws the physical block pool, each request's block table, and — from the same run's numbers —
what a contiguous reservation of prompt + max_new_tokens per request would have held.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from ..config import DEFAULT_MODEL


DEFAULT_PROMPTS = ("The capital of France is\nOnce upon a time, in a small village by the sea,\n"
                   "def fibonacci(n):\nThe three primary colours are")


def prompt_lines(text: str, limit: int = 6) -> list[str]:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise ValueError("give at least one prompt (one per line)")
    if len(lines) > limit:
        raise ValueError(f"at most {limit} prompts")
    return lines


def run(params: dict, should_stop: Callable[[], bool] | None = None) -> Iterator[dict]:
    from ..engine import load_engine  # here, not at the top: the web process imports check_params only
    from ..llm_engine import run_batch
    from ..sampling import SamplingParams
    from ..scheduler import Request, SchedulerConfig

    engine = load_engine(params.get("model", DEFAULT_MODEL))
    prompts = prompt_lines(params.get("prompts", DEFAULT_PROMPTS))
    max_new = int(params.get("max_new_tokens", 20))
    spacing = int(params.get("arrival_every", 2))
    config = SchedulerConfig(mode="continuous", block_size=int(params.get("block_size", 8)),
                             num_blocks=int(params.get("num_blocks", 24)), max_num_seqs=8)
    reqs = [Request(f"r{i}", engine.tokenizer.encode(p), SamplingParams(max_new_tokens=max_new, stop_at_eos=False))
            for i, p in enumerate(prompts)]
    arrivals = {r.request_id: i * spacing for i, r in enumerate(reqs)}
    for ev in run_batch(engine, reqs, config, arrival_steps=arrivals, should_stop=should_stop):
        yield ev.to_dict()


def check_params(params: dict) -> None:
    """The prompts split into 1–6 lines (the demos app calls this before queueing a run)."""
    prompt_lines(params.get("prompts", DEFAULT_PROMPTS))
