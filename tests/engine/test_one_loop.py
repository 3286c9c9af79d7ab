"""One generation loop: every token the CLI, the worker's service, the benches' engine API and the course's demo
runners generate comes out of `LLMEngine.step()` (or a speculative round, which verifies through the same
runner). A second loop (a caller running the model token by token itself) fails here: the model's forward may
only be called by the runner, or by the few one-pass measurements listed below, each once per run, never per
token. Asserted on the code path by counting calls, not on source text.
"""
from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path

import pytest

from inference_core.engine.llm_engine import LLMEngine
from inference_core.model.transformer import Transformer
from inference_core.engine.model_runner import ModelRunner
from inference_core.speculative.decode import SpeculativeRun

# Single forward passes that measure something and generate nothing (callers' files).
ONE_PASS_MEASUREMENTS = {
    "flash_attention.py": "times one prefill per attention backend",
    "quantization.py": "one prefill with hooks records activation outliers",
    "attention.py": "one prefill records the primer's attention weights",
    "perplexity.py": "scores a text in one pass",
}
ROOT = Path(__file__).resolve().parents[2]


class Calls:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.steps = 0
        self.rounds = 0
        self.direct: Counter[str] = Counter()  # caller file → forwards outside the runner and speculative rounds

    def caller(self) -> str:
        import traceback

        for frame in reversed(traceback.extract_stack()[:-2]):
            path = Path(frame.filename)
            if (ROOT in path.parents and "site-packages" not in path.parts
                    and path.name not in ("transformer.py", "test_one_loop.py")):
                return str(path.relative_to(ROOT))
        return "?"


@pytest.fixture
def calls(monkeypatch):
    seen = Calls()
    step, round_, forward, runner_forward = LLMEngine.step, SpeculativeRun.round, Transformer.forward, ModelRunner.forward_sequence
    in_round = threading.local()

    def counted_step(self):
        with seen.lock:
            seen.steps += 1
        return step(self)

    def counted_round(self):
        with seen.lock:
            seen.rounds += 1
        in_round.active = True
        try:
            return round_(self)
        finally:
            in_round.active = False

    def watched_forward(self, *a, **kw):
        with seen.lock:
            seen.direct[seen.caller()] += 1
        return forward(self, *a, **kw)

    def watched_runner_forward(self, *a, **kw):
        # Speculative prefill/verify and a model draft's guesses use the runner's own-blocks sequence entry point.
        if not getattr(in_round, "active", False) and "speculative/decode.py" not in seen.caller():
            with seen.lock:
                seen.direct[seen.caller()] += 1
        return runner_forward(self, *a, **kw)

    monkeypatch.setattr(LLMEngine, "step", counted_step)
    monkeypatch.setattr(SpeculativeRun, "round", counted_round)
    monkeypatch.setattr(Transformer, "forward", watched_forward)
    monkeypatch.setattr(ModelRunner, "forward_sequence", watched_runner_forward)
    return seen


def assert_no_second_loop(calls: Calls) -> None:
    stray = {f: n for f, n in calls.direct.items() if os.path.basename(f) not in ONE_PASS_MEASUREMENTS}
    assert not stray, f"model forwards outside LLMEngine.step(): {stray}"
    assert all(n <= 4 for n in calls.direct.values()), calls.direct  # measurements, not one call per token


@pytest.mark.model
def test_the_cli_generates_through_step(calls, capsys, tmp_path):
    from inference_core.cli.main import main

    assert main(["generate", "--prompt", "The capital of France is", "--max-new-tokens", "5"]) == 0
    assert calls.steps >= 5
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Hello\nWater boils at\n")
    before = calls.steps
    assert main(["batch", "--prompts-file", str(prompts), "--max-new-tokens", "3"]) == 0
    assert 3 <= calls.steps - before <= 6  # two requests share steps
    assert_no_second_loop(calls)


@pytest.mark.model
def test_the_service_and_the_engine_api_generate_through_step(calls, engine):
    from inference_core import GenerationParams
    from inference_core.engine.serving import EngineService

    ids = engine.encode_prompt("One, two, three,", False)
    for use_cache in (True, False):
        before = calls.steps
        out = engine.generate_ids(ids, GenerationParams(max_new_tokens=6, stop_at_eos=False, use_cache=use_cache))
        assert len(out) == 6 and calls.steps - before == 6
    service = EngineService(engine)
    before = calls.steps
    events = list(service.generate_events(ids, GenerationParams(max_new_tokens=4, stop_at_eos=False)))
    assert [e.type for e in events].count("token") == 4 and calls.steps - before == 4
    assert_no_second_loop(calls)


def small(spec) -> dict:
    """The demo's defaults with few new tokens, so every runner finishes in seconds."""
    from demos.registry import validate

    params = {}
    for name in ("max_new_tokens", "n_requests"):
        p = spec.params.get(name)
        if p is not None and p.default is not None:
            params[name] = max(p.min_value or 1, min(p.default, 4))
    return {**validate(spec.name, params), "model": "smollm2-135m"}


@pytest.mark.model
def test_every_demo_runner_generates_through_step(calls, engine):
    from demos.catalog import DEMOS

    generated: dict[str, int] = {}
    for name, spec in DEMOS.items():
        steps, rounds = calls.steps, calls.rounds
        events = list(spec.load_runner()(small(spec)))
        assert events, name
        generated[name] = (calls.steps - steps) + (calls.rounds - rounds)
        assert_no_second_loop(calls)
    makes_tokens = {name for name, spec in DEMOS.items() if "max_new_tokens" in spec.params}
    assert makes_tokens, DEMOS.keys()
    for name in makes_tokens:
        assert generated[name] > 0, (name, generated)
