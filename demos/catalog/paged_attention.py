"""Paged-attention demo: several requests decode together; every block allocation and free is streamed.

The page draws the physical block pool, each request's block table, and — from the same run's numbers —
what a contiguous reservation of prompt + max_new_tokens per request would have held.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from inference_core import DEFAULT_MODEL

from ..spec import DemoSpec, ParamSpec
from .runner import Models


# The first two share their opening sentence, so the second request's first blocks are the first's (shared, one
# copy in the pool) rather than a second copy: what a block table buys beyond no fragmentation.
DEFAULT_PROMPTS = ("You are a helpful assistant. Answer in one short sentence. What is the capital of France?\n"
                   "You are a helpful assistant. Answer in one short sentence. Why is the sky blue?\n"
                   "Once upon a time, in a small village by the sea,\n"
                   "def fibonacci(n):")


MAX_PROMPTS = 6


def prompt_lines(text: str, limit: int = MAX_PROMPTS) -> list[str]:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise ValueError("give at least one prompt (one per line)")
    if len(lines) > limit:
        raise ValueError(f"at most {limit} prompts")
    return lines


def run(params: dict, should_stop: Callable[[], bool] | None = None,
        *, models: Models) -> Iterator[dict]:
    # here, not at the top: the web process loads no torch
    from inference_core import Request, SamplingParams, SchedulerConfig, run_batch

    params = SPEC.with_defaults(params)
    engine = models.get(params.get("model", DEFAULT_MODEL))
    prompts = prompt_lines(params["prompts"])
    max_new = int(params["max_new_tokens"])
    spacing = int(params["arrival_every"])
    # Prefix caching on: a request whose prompt starts with blocks already in the pool maps them into its table.
    config = SchedulerConfig(mode="continuous", block_size=int(params["block_size"]),
                             num_blocks=int(params["num_blocks"]), max_num_seqs=8, prefix_caching=True)
    reqs = [Request(f"r{i}", engine.tokenizer.encode(p), SamplingParams(max_new_tokens=max_new, stop_at_eos=False))
            for i, p in enumerate(prompts)]
    arrivals = {r.request_id: i * spacing for i, r in enumerate(reqs)}
    for ev in run_batch(engine, reqs, config, arrival_steps=arrivals, should_stop=should_stop):
        yield ev.to_dict()


def check_params(params: dict) -> None:
    """The prompts split into 1–6 lines (the demos app calls this before queueing a run)."""
    prompt_lines(params["prompts"])


SPEC = DemoSpec(
    name="paged-attention",
    title="Paged KV cache: blocks and block tables",
    description=(
        "Several requests decode together. Watch the physical KV blocks fill, each request's block table "
        "grow, and compare with reserving a contiguous region for each request's maximum length."
    ),
    runner=run,
    check=check_params,
    module="js/demos/paged-attention.js",
    params={
        "prompts": ParamSpec("str", default=DEFAULT_PROMPTS, label="Prompts (one per line, up to 6)",
                             max_chars=1200, max_tokens=200, limits={"max_lines": MAX_PROMPTS}),
        "max_new_tokens": ParamSpec("int", default=12, label="New tokens per request", min_value=2, max_value=24),
        "block_size": ParamSpec("choice", default=8, label="Block size (tokens)", choices=(4, 8, 16)),
        "num_blocks": ParamSpec("int", default=24, label="Physical blocks in the pool", min_value=6, max_value=64),
        "arrival_every": ParamSpec("int", default=2, label="A new request every … steps", min_value=0, max_value=8),
    },
    try_next=(
        "Lower “Physical blocks in the pool” to 8: the pool runs out, a request is preempted, its blocks are "
        "freed and its tokens recomputed later.",
        "Set the block size to 16: fewer, larger blocks leave more of each request's last block empty.",
    ),
)
