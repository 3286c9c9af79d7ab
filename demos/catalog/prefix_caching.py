"""Prefix-caching demo: questions that share a long system prompt, served without and then with the
prefix cache. Shared blocks arrive as `kv_block` events with op "shared"; TTFT per question is in
`request_finished`. Then both settings are timed in alternating repeats (`comparison.py`): the `comparison`
event holds the time to first token that a student can trust, with the prompt tokens prefilled beside it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from inference_core import DEFAULT_MODEL

from ..spec import DemoSpec, ParamSpec
from .comparison import Side, compare
from .paged_attention import prompt_lines
from .runner import Models


DEFAULT_SYSTEM = (
    "You are the help desk of the city library. Opening hours: Monday to Friday 9:00 to 19:00, Saturday 10:00 "
    "to 16:00, closed on Sunday and public holidays. Members may borrow up to twelve items at a time. Books are "
    "lent for three weeks, films and games for one week. A loan can be renewed twice online unless someone has "
    "reserved the item. Late returns cost 20 cents per item per day, capped at five euros per item. Membership "
    "is free for residents; bring an identity card and a proof of address. The reading room on the second "
    "floor is quiet; group rooms can be booked for two hours. Printing costs 10 cents a page. Answer briefly.\n"
)
MAX_QUESTIONS = 4
DEFAULT_QUESTIONS = "When are you open on Saturday?\nHow long can I keep a film?\nHow much does printing cost?"


UNCACHED, CACHED = "without the cache", "with the prefix cache"


def _requests(engine, system: str, questions: list[str], max_new: int) -> list:
    from inference_core import Request, SamplingParams

    return [Request(f"q{i}", engine.tokenizer.encode(f"{system}Question: {q}\nAnswer:"),
                    SamplingParams(max_new_tokens=max_new)) for i, q in enumerate(questions)]


def _serve(engine, reqs: list, max_new: int, block_size: int, cached: bool, should_stop=None) -> Iterator:
    """The questions one after another (each arrives after the previous answer: a chat-like sequence)."""
    from inference_core import SchedulerConfig, run_batch

    spacing = max_new + 1
    arrivals = {r.request_id: i * spacing for i, r in enumerate(reqs)}
    # Room for every request at once (nothing needs evicting); a few MB per question, not a fixed pool.
    blocks = sum(-(-(len(r.prompt_ids) + max_new) // block_size) for r in reqs) + 2
    config = SchedulerConfig(block_size=block_size, num_blocks=blocks, prefix_caching=cached)
    return run_batch(engine, reqs, config, arrival_steps=arrivals, should_stop=should_stop)


def timed_side(engine, system: str, questions: list[str], block_size: int, cached: bool) -> tuple[float, dict]:
    """One uninterrupted serve of the questions, one new token each (time to first token needs no more): the mean
    TTFT of the questions after the first (the ones that can reuse its prompt; the first's alone if there is one),
    and the counters that explain it."""
    events = [ev.to_dict() for ev in _serve(engine, _requests(engine, system, questions, 1), 1, block_size, cached)]
    done = [e for e in events if e["type"] == "request_finished"]
    later = done[1:] or done
    counters = {
        "prompt tokens prefilled": sum(e["n_prompt_tokens"] - e["n_cached_tokens"] for e in done),
        "prompt tokens served from the cache": sum(e["n_cached_tokens"] for e in done),
        "KV blocks shared": sum(1 for e in events if e["type"] == "kv_block" and e["op"] == "shared"),
    }
    return sum(e["ttft_s"] for e in later) / len(later), counters


def lesson_claim(counters: dict[str, dict]) -> str:
    """The lesson: the cache cuts the time to first token of a question that reuses the shared prompt. Where
    nothing is reused (one question, or a prompt shorter than a block) it makes no claim."""
    return CACHED if counters.get(CACHED, {}).get("KV blocks shared", 0) > 0 else ""


def run(params: dict, should_stop: Callable[[], bool] | None = None,
        *, models: Models) -> Iterator[dict]:
    # here, not at the top: the web process loads no torch
    from inference_core import Request, SamplingParams, SchedulerConfig, run_batch

    params = SPEC.with_defaults(params)
    engine = models.get(params.get("model", DEFAULT_MODEL))
    system = params.get("system_prompt", DEFAULT_SYSTEM)
    questions = prompt_lines(params["questions"], limit=MAX_QUESTIONS)
    max_new = int(params["max_new_tokens"])
    block_size = int(params["block_size"])
    # The streamed runs show the mechanism (blocks computed or shared, the answers); their times span the
    # worker's other runs, so the timing comes from the alternating repeats below.
    for cached in (False, True):
        reqs = _requests(engine, system, questions, max_new)
        for ev in _serve(engine, reqs, max_new, block_size, cached, should_stop):
            yield ev.to_dict()
        if should_stop is not None and should_stop():
            return
    sides = [Side(label, lambda c=c: timed_side(engine, system, questions, block_size, c))
             for label, c in ((UNCACHED, False), (CACHED, True))]
    yield from compare(*sides, metric="time to first token of the questions after the first", claim=lesson_claim,
                       should_stop=should_stop)


def check_params(params: dict) -> None:
    """The questions split into 1–4 lines (the demos app calls this before queueing a run)."""
    prompt_lines(params["questions"], limit=MAX_QUESTIONS)


SPEC = DemoSpec(
    name="prefix-caching",
    title="Prefix caching: reuse a shared system prompt",
    description=(
        "Questions that share a long system prompt, served without and then with the prefix cache: cached "
        "blocks are reused instead of recomputed, and the time to first token drops."
    ),
    runner=run,
    check=check_params,
    module="js/demos/prefix-caching.js",
    params={
        "questions": ParamSpec("str", default=DEFAULT_QUESTIONS, label="Questions (one per line, up to 4)",
                               max_chars=600, max_tokens=120, limits={"max_lines": MAX_QUESTIONS}),
        "max_new_tokens": ParamSpec("int", default=8, label="New tokens per answer", min_value=1, max_value=16),
        "block_size": ParamSpec("choice", default=16, label="Block size (tokens)", choices=(8, 16, 32)),
    },
    try_next=(
        "Set the block size to 32: only whole blocks are cached, so the part of the shared prompt that ends "
        "in a partly filled block is computed again.",
        "Add a fourth line to “Questions”: it reuses the same cached blocks, so its time to first token drops too.",
    ),
)
