"""The speculative-decoding demo: time plain decoding once, then stream draft → verify → accept rounds."""
from __future__ import annotations

from collections.abc import Callable, Iterator

from ..config import DEFAULT_MODEL
from ..engine import load_engine
from ..speculative import SpecBaseline, SpecParams, make_draft, plain_timed, speculate

DRAFT_CHOICES = ("ngram", "self-early-exit", "self-int8")


def run(params: dict, should_stop: Callable[[], bool] | None = None) -> Iterator[dict]:
    """Params: prompt, chat, draft (one of DRAFT_CHOICES), exit_layers, k, temperature, max_new_tokens, seed,
    baseline. Yields run_started, spec_baseline (unless baseline is false), spec_started, spec_round…,
    spec_finished, run_finished."""
    engine = load_engine(params.get("model", DEFAULT_MODEL))
    kind = params.get("draft", "ngram")
    if kind == "self-early-exit":
        kind = f"self-early-exit:{int(params.get('exit_layers', 20))}"
    draft = make_draft(engine, kind)
    spec = SpecParams(k=int(params.get("k", 4)), max_new_tokens=int(params.get("max_new_tokens", 32)),
                      temperature=float(params.get("temperature", 0.0)), seed=params.get("seed"))
    prompt_ids = engine.encode_prompt(params["prompt"], bool(params.get("chat", False)))
    for event in speculate(engine, prompt_ids, draft, spec, should_stop):
        yield event.to_dict()
        if event.type == "run_started" and params.get("baseline", True):
            if should_stop is not None and should_stop():
                continue  # speculate() notices too and finishes as cancelled
            # plain decoding of the same request, timed, so the page can show a running speedup
            ids, total, prefill = plain_timed(engine, prompt_ids, spec)
            yield SpecBaseline(token_ids=ids, total_time_s=total, time_per_token_s=total / max(len(ids), 1),
                               prefill_time_s=prefill).to_dict()
