"""The sampling demo ("Choosing the next token"): the student's prompt and sampler settings on the real model.

The run goes through the batching service with `trace_top` set, so after each `token` event the engine emits a
`sampling_step` (docs/trace-schema.md): the 20 most likely next tokens with their probabilities before and after
temperature, how many tokens top-k, top-p and min-p keep, and the drawn token's rank. A seed makes the draws, and
so the whole run, repeatable (the service gives every request its own seeded generator).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from inference_core import DEFAULT_MODEL

from ..spec import DemoSpec, ParamSpec
from .kv_cache import EventDicts
from .runner import Models

TRACE_TOP = 20  # the tokens each step lists: enough to see a cut, few enough for a phone's bar chart
MAX_PROMPT_TOKENS = 64
DEFAULT_PROMPT = "Once upon a time, in a small village by the sea,"


def generation_params(params: dict):
    """The run's `GenerationParams` from the demo's clean params."""
    from inference_core import GenerationParams  # the worker only: the web loads no torch

    return GenerationParams(
        max_new_tokens=int(params["max_new_tokens"]), temperature=float(params["temperature"]),
        top_k=int(params["top_k"]), top_p=float(params["top_p"]), min_p=float(params["min_p"]),
        repetition_penalty=float(params["repetition_penalty"]), seed=params["seed"], trace_top=TRACE_TOP,
        stop_at_eos=False)


def run(params: dict, should_stop: Callable[[], bool] | None = None, *, models: Models) -> Iterator[dict]:
    params = SPEC.with_defaults(params)
    service = models.service(params.get("model", DEFAULT_MODEL))
    return EventDicts(service.generate(params["prompt"], generation_params(params), should_stop),
                      needs_engine_lock=False)


SPEC = DemoSpec(
    name="sampling",
    title="Choosing the next token",
    description=(
        "Run the real model on your prompt and, at every step, see its 20 most likely next tokens with their "
        "probabilities before and after temperature, which of them top-k, top-p and min-p keep, and the token "
        "the sampler drew."
    ),
    runner=run,
    module="js/demos/sampling.js",
    params={
        "prompt": ParamSpec("str", default=DEFAULT_PROMPT, label="Prompt", max_chars=600,
                            max_tokens=MAX_PROMPT_TOKENS),
        "max_new_tokens": ParamSpec("int", default=12, label="New tokens", min_value=1, max_value=32),
        "temperature": ParamSpec("float", default=0.8, label="Temperature (0 = greedy)", min_value=0.0,
                                 max_value=2.0),
        "top_k": ParamSpec("int", default=0, label="Top-k (0 = off)", min_value=0, max_value=1000),
        "top_p": ParamSpec("float", default=0.9, label="Top-p (1 = off)", min_value=0.01, max_value=1.0),
        "min_p": ParamSpec("float", default=0.0, label="Min-p (0 = off)", min_value=0.0, max_value=1.0),
        "repetition_penalty": ParamSpec("float", default=1.0, label="Repetition penalty (1 = off)", min_value=1.0,
                                        max_value=2.0),
        "seed": ParamSpec("int", default=7, label="Seed (empty = a fresh draw each run)", min_value=0,
                          max_value=2**31 - 1, nullable=True),
    },
    presets=(
        {"label": "Story opening", "prompt": DEFAULT_PROMPT},
        {"label": "Capital of France", "prompt": "The capital of France is"},
        {"label": "A list", "prompt": "My favourite fruits are apples, bananas,"},
    ),
    try_next=(
        "Set “Temperature” to 0: every step keeps one token, the most likely, and the run is the same whatever "
        "the seed.",
        "Set “Temperature” to 1.5 and “Top-p” to 1: the bars flatten, the kept set grows to the whole vocabulary "
        "and the text drifts; then set “Min-p” to 0.1 and run the same seed again.",
    ),
)
