"""The engine's one hook for code from outside it: `Request.chooser`, called instead of `sample` with the same
arguments (the step's logits row, the request's params, its generator, its ids so far), picks each token. The
exercises' live runs hand it a student's sampler; here plain functions show what it promises."""
from __future__ import annotations

from inference_core.engine.llm_engine import generate_one
from inference_core.engine.loaded_model import GenerationParams
from inference_core.engine.request import Request
from inference_core.engine.trace import RunFinished, TokenStep


def generated(engine, chooser, params: GenerationParams) -> list[int]:
    prompt = engine.encode_prompt("The sky is", False)
    events = list(generate_one(engine, Request("run", prompt, params, chooser=chooser)))
    assert isinstance(events[-1], RunFinished)
    tokens = [e.token_id for e in events if isinstance(e, TokenStep)]
    assert tokens == events[-1].token_ids
    return tokens


def test_an_argmax_chooser_is_greedy_decoding_and_sees_every_step(loaded_models):
    engine = loaded_models.get()
    calls = []

    def argmax(logits, params, generator, *history):
        calls.append((tuple(logits.shape), params.temperature, len(history[0]) if history else None))
        return int(logits.argmax())

    params = GenerationParams(max_new_tokens=6, stop_at_eos=False)
    assert generated(engine, argmax, params) == engine.generate_ids(engine.encode_prompt("The sky is", False), params)
    assert len(calls) == 6 and all(shape == (engine.config.vocab_size,) for shape, _, _ in calls)


def test_the_chooser_decides_even_when_the_request_is_greedy(loaded_models):
    engine = loaded_models.get()
    comma = engine.tokenizer.encode(",")[-1]
    tokens = generated(engine, lambda *_: comma, GenerationParams(max_new_tokens=4, stop_at_eos=False))
    assert tokens == [comma] * 4  # the greedy shortcut (one argmax for the batch) never bypasses a chooser
