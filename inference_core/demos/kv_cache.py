"""The KV-cache demo: generate with or without the cache and stream every step's cost."""
from __future__ import annotations

from collections.abc import Callable, Iterator

from ..engine import GenerationParams, load_engine


def run(params: dict, should_stop: Callable[[], bool] | None = None) -> Iterator[dict]:
    engine = load_engine(params.get("model", "smollm2-135m"))
    gen = GenerationParams(
        max_new_tokens=int(params.get("max_new_tokens", 32)),
        temperature=float(params.get("temperature", 0.0)),
        top_k=int(params.get("top_k", 0)),
        top_p=float(params.get("top_p", 1.0)),
        seed=params.get("seed"),
        use_cache=bool(params.get("use_cache", True)),
        chat=bool(params.get("chat", False)),
    )
    for event in engine.generate(params["prompt"], gen, should_stop):
        yield event.to_dict()
