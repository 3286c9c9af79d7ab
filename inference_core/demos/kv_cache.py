"""The KV-cache demo: generate with or without the cache and stream every step's cost.

With the cache on, the run goes through the process's batching service, so students who press Run at
the same moment share forward passes (each token event says how many did: `batch_size`). Without the
cache there is nothing to page or share: the run recomputes the whole sequence every step on its own.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from ..engine import GenerationParams, load_engine
from ..serving import get_service


def run(params: dict, should_stop: Callable[[], bool] | None = None) -> Iterator[dict]:
    model = params.get("model", "smollm2-135m")
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
    for event in source.generate(params["prompt"], gen, should_stop):
        yield event.to_dict()
