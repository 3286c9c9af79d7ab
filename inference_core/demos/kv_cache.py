"""The KV-cache demo: generate with or without the cache and stream every step's cost.

With the cache on, the run goes through the process's batching service, so students who press Run at
the same moment share forward passes (each token event says how many did: `batch_size`). Without the
cache there is nothing to page or share: the run recomputes the whole sequence every step on its own.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from ..config import DEFAULT_MODEL
from ..engine import GenerationParams, load_engine
from ..serving import get_service
from ..trace import TraceEvent


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
    model = params.get("model", DEFAULT_MODEL)
    gen = GenerationParams(
        max_new_tokens=int(params.get("max_new_tokens", 32)),
        temperature=float(params.get("temperature", 0.0)),
        top_k=int(params.get("top_k", 0)),
        top_p=float(params.get("top_p", 1.0)),
        seed=params.get("seed"),
        use_cache=bool(params.get("use_cache", True)),
        chat=bool(params.get("chat", False)),
    )
    source = get_service(model) if gen.use_cache else load_engine(model)
    return EventDicts(source.generate(params["prompt"], gen, should_stop), needs_engine_lock=not gen.use_cache)
