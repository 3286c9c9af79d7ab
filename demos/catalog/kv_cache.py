"""The KV-cache demo: generate with or without the cache and stream every step's cost.

With the cache on, the run goes through the process's batching service, so students who press Run at
the same moment share forward passes (each token event says how many did: `batch_size`). Without the
cache there is nothing to page or share: the run recomputes the whole sequence every step on its own.
Either way the run ends with both settings timed in alternating repeats (`comparison.py`): one decode step at
the run's final length with and without the cache, the tokens computed and the K/V bytes read beside the times.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator

from inference_core import DEFAULT_MODEL, TraceEvent

from ..spec import DemoSpec, ParamSpec, max_new_tokens_limit, max_prompt_tokens_limit
from .comparison import Side, compare
from .runner import Models


class EventDicts:
    """The run's events as dicts. `needs_engine_lock` tells a multi-threaded caller whether `next()` must
    hold the engine's lock: not for the batching service, which is thread-safe and can only batch callers
    that reach it at the same time; yes for a direct engine run. It is read before every `next()`: once the
    generation's `run_finished` is out, the comparison that follows runs the engine directly, so it turns true."""

    def __init__(self, events: Iterator[TraceEvent], needs_engine_lock: bool,
                 then: Callable[[list[dict]], Iterator[dict]] | None = None) -> None:
        self._events = events
        self.needs_engine_lock = needs_engine_lock
        self._stream = self._chain(then)

    def _chain(self, then) -> Iterator[dict]:
        seen: list[dict] = []
        try:
            for ev in self._events:
                d = ev.to_dict()
                seen.append(d)
                if d["type"] == "run_finished" and d["finish_reason"] != "cancelled" and then is not None:
                    self.needs_engine_lock = True  # the next step runs `then`, on the engine itself
                yield d
        finally:
            self._events.close()
        last = seen[-1] if seen else {}
        if then is not None and last.get("type") == "run_finished" and last["finish_reason"] != "cancelled":
            yield from then(seen)

    def __iter__(self) -> "EventDicts":
        return self

    def __next__(self) -> dict:
        return next(self._stream)

    def close(self) -> None:
        self._stream.close()


WITH, WITHOUT = "with the cache", "without the cache"
KV_REPEATS = 5
STEPS_PER_SAMPLE = 3  # a sample is the median of 3 decode steps: one step caught behind another run's forward
# pass (tens of milliseconds on a shared CPU, as long as the step itself) does not decide it


def step_sides(engine, token_ids: list[int]) -> tuple[Side, Side]:
    """Decode steps at the run's final length, with the cache (1 new token, the rest's K/V read from the cache)
    and without (the whole sequence recomputed). Each sample is a short generation on the engine itself: the median
    of its decode steps (its prefill is not part of the comparison)."""
    from inference_core import GenerationParams

    def side(label: str, use_cache: bool) -> Side:
        gen = GenerationParams(max_new_tokens=STEPS_PER_SAMPLE + 1, temperature=0.0, use_cache=use_cache,
                               stop_at_eos=False)

        def measure() -> tuple[float, dict]:
            steps = [ev for ev in engine.generate_events(token_ids, gen) if ev.type == "token"][1:]
            first = steps[0]
            return statistics.median(s.step_time_s for s in steps), {
                "tokens computed in the step": first.n_input_tokens,
                "KV bytes read from the cache": first.kv_bytes_total if use_cache else 0}
        return Side(label, measure)

    return side(WITH, True), side(WITHOUT, False)


def lesson_claim(counters: dict[str, dict]) -> str:
    """The lesson: without the cache a step recomputes the whole prefix, so it takes longer than a cached step;
    for a sequence of a few tokens the two are alike, and it makes no claim."""
    recomputed = counters.get(WITHOUT, {}).get("tokens computed in the step", 0)
    return WITH if recomputed >= 16 else ""


def compare_steps(engine, should_stop: Callable[[], bool] | None) -> Callable[[list[dict]], Iterator[dict]]:
    def then(seen: list[dict]) -> Iterator[dict]:
        started = seen[0]
        ids = started["prompt_token_ids"] + seen[-1]["token_ids"]  # the prompt is already templated
        others = max((e["batch_size"] for e in seen if e["type"] == "token"), default=1) - 1
        yield from compare(*step_sides(engine, ids), metric="time of one decode step at the run's "
                           "final length (median of 3 per repeat)", claim=lesson_claim, other_sequences=others, repeats=KV_REPEATS,
                           should_stop=should_stop)
    return then


def run(params: dict, should_stop: Callable[[], bool] | None = None,
        *, models: Models) -> EventDicts:
    from inference_core import GenerationParams  # the worker only: the web loads no torch

    params = SPEC.with_defaults(params)
    model = params.get("model", DEFAULT_MODEL)
    gen = GenerationParams(
        max_new_tokens=int(params["max_new_tokens"]),
        temperature=float(params["temperature"]),
        top_k=int(params.get("top_k", 0)),
        top_p=float(params.get("top_p", 1.0)),
        seed=params["seed"],
        use_cache=bool(params["use_cache"]),
        chat=bool(params.get("chat", False)),
    )
    source = models.service(model) if gen.use_cache else models.get(model)
    return EventDicts(source.generate(params["prompt"], gen, should_stop), needs_engine_lock=not gen.use_cache,
                      then=compare_steps(models.get(model), should_stop))


SPEC = DemoSpec(
    name="kv-cache",
    title="The KV cache, live",
    description=(
        "Generate text with the real engine and watch the KV cache grow token by token; "
        "run again without the cache to see the per-step cost climb."
    ),
    runner=run,
    module="js/demos/kv-cache.js",
    params={
        "prompt": ParamSpec(
            "str",
            default="The capital of France is",
            label="Prompt",
            max_chars=8000,
            max_tokens=max_prompt_tokens_limit,
        ),
        "max_new_tokens": ParamSpec(
            "int", default=24, label="Max new tokens", min_value=1, max_value=max_new_tokens_limit
        ),
        "use_cache": ParamSpec("bool", default=True, label="Use the KV cache"),
        "temperature": ParamSpec("float", default=0.0, label="Temperature", min_value=0.0, max_value=2.0),
        "seed": ParamSpec("int", default=None, label="Seed", min_value=0, max_value=2**31 - 1, nullable=True),
    },
    presets=(
        {"label": "Capital of France", "prompt": "The capital of France is"},
        {"label": "Count", "prompt": "One, two, three, four,"},
        {"label": "Story opening", "prompt": "Once upon a time, in a small village by the sea,"},
        {"label": "Recipe", "prompt": "To make a simple tomato sauce, first"},
    ),
    try_next=(
        "Untick “Use the KV cache” and run again: without the cache every step recomputes the whole prefix, so "
        "the step time climbs token by token instead of staying flat.",
        "Raise “Max new tokens” to 96 with the cache on: the step time stays flat while the cache grows by the "
        "same number of bytes for every token.",
    ),
)
