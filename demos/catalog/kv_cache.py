"""The KV-cache demo: generate with or without the cache and stream every step's cost.

With the cache on, the run goes through the process's batching service, so students who press Run at
the same moment share forward passes (each token event says how many did: `batch_size`). Without the
cache there is nothing to page or share: the run recomputes the whole sequence every step on its own.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from inference_core import DEFAULT_MODEL, TraceEvent

from ..spec import DemoSpec, ParamSpec, max_new_tokens_limit, max_prompt_tokens_limit


class EventDicts:
    """The run's events as dicts. `needs_engine_lock` tells a multi-threaded caller whether `next()` must
    hold the engine's lock: not for the batching service, which is thread-safe and can only batch callers
    that reach it at the same time; yes for a direct engine run."""

    def __init__(self, events: Iterator[TraceEvent], needs_engine_lock: bool) -> None:
        self._events = events
        self.needs_engine_lock = needs_engine_lock

    def __iter__(self) -> "EventDicts":
        return self

    def __next__(self) -> dict:
        return next(self._events).to_dict()

    def close(self) -> None:
        self._events.close()


def run(params: dict, should_stop: Callable[[], bool] | None = None) -> EventDicts:
    from inference_core import GenerationParams, load_engine  # the worker only: the web loads no torch
    from inference_core.engine.serving import get_service

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
    source = get_service(model) if gen.use_cache else load_engine(model)
    return EventDicts(source.generate(params["prompt"], gen, should_stop), needs_engine_lock=not gen.use_cache)


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
