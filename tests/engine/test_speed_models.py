"""Speed-only models: real shapes, seeded random weights, labelled in every output, never text."""
from __future__ import annotations

import torch

from inference_core import GenerationParams
from inference_core.cli.args import _known_model, check_arguments
from inference_core.engine.loaded_model import speed_only_engine
from inference_core.model.speed_models import SPEED_ONLY_LABEL, SPEED_ONLY_MODELS


def test_the_shapes_are_the_real_models():
    # Llama 3.2 1B has 1.24B parameters (tied head), Llama 3 8B 8.03B.
    assert round(SPEED_ONLY_MODELS["speed-llama-3.2-1b"].n_params() / 1e9, 2) == 1.24
    assert round(SPEED_ONLY_MODELS["speed-llama-3-8b"].n_params() / 1e9, 2) == 8.03


def test_a_speed_only_engine_is_seeded_labelled_and_generates_no_text():
    runs = []
    for _ in range(2):  # one layer: the embedding alone is 128,256 × 2,048
        engine = speed_only_engine("speed-llama-3.2-1b", torch.device("cpu"), n_layers=1)
        assert SPEED_ONLY_LABEL in engine.name
        events = list(engine.generate("hello", GenerationParams(max_new_tokens=3, stop_at_eos=False)))
        runs.append(events)
        del engine
    started, *tokens, finished = runs[0]
    assert SPEED_ONLY_LABEL in started.model and started.to_dict()["model"] == started.model
    assert [e.type for e in tokens] == ["token"] * 3
    assert all(e.text == f"<{e.token_id}>" for e in tokens)  # ids, not words
    assert finished.token_ids == runs[1][-1].token_ids  # the same seed draws the same weights


def test_the_cli_accepts_speed_only_names_before_loading_anything():
    assert _known_model("speed-llama-3-8b") is None
    assert "speed-llama-3.2-1b" in _known_model("llama-9000")  # the error lists them

    class Args:
        model = "speed-llama-3.2-1b"

    check_arguments(Args())
