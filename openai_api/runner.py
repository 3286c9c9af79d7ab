"""The worker's side of an API request: its Run (demo API_DEMO) goes through the worker's batching service, like
a cached demo run, so API callers and students share forward passes. Imported by workers/run.py only (the web
side never loads torch); the engine is imported inside `run_completion`."""
from __future__ import annotations

from collections.abc import Callable

API_DEMO = "openai-api"  # Run.demo of an API request: not a demo page, so not in demos.catalog


def run_completion(params: dict, should_stop: Callable[[], bool] | None = None, *, models):
    """The run's events (run_started, token…, run_finished) as dicts, from the service of `params["model"]`."""
    from demos.catalog.kv_cache import EventDicts
    from inference_core import GenerationParams

    gen = GenerationParams(max_new_tokens=int(params["max_tokens"]), temperature=float(params["temperature"]),
                           top_p=float(params["top_p"]), seed=params["seed"])
    events = models.service(params["model"]).generate_events(list(params["prompt_token_ids"]), gen, should_stop)
    return EventDicts(events, needs_engine_lock=False)  # the service is thread-safe: batch, don't serialise
