"""The attention-variants demo on the real model: the variants change only what the cache holds, measured against
the model as trained; its bytes are the engine's own, its masks the ones the lesson describes, and its figures the
ones the lesson's exercise asks for."""
from __future__ import annotations

import pytest
import torch

from demos.catalog import attention_variants as av
from demos.registry import DemoParamError, validate
from exercises.catalog import kv_budget
from inference_core.engine.trace import validate_event


@pytest.fixture(scope="module")
def events(loaded_models):
    return list(av.run(validate("attention-variants", {}), models=loaded_models))


def by_variant(events) -> dict[str, dict]:
    return {e["variant"]: e for e in events if e["type"] == "kv_variant"}


def test_every_event_validates_in_order(events):
    for ev in events:
        validate_event(ev)
    assert [e["type"] for e in events] == ["kv_groups"] + ["kv_variant"] * len(av.VARIANTS) + ["kv_budget"]


def test_the_groups_are_the_model_s_gqa_and_each_row_is_a_distribution(events, loaded_models):
    cfg = loaded_models.get().config
    groups = events[0]
    assert groups["kv_head_of"] == [h // (cfg.n_heads // cfg.n_kv_heads) for h in range(cfg.n_heads)]
    assert len(groups["last_rows"]) == cfg.n_heads
    for row in groups["last_rows"]:
        assert len(row) == len(groups["tokens"]) and sum(row) == pytest.approx(1, abs=1e-3)
    sim = groups["key_similarity"]
    assert all(sim[i][i] == pytest.approx(1, abs=1e-3) for i in range(cfg.n_kv_heads))


def test_the_model_as_trained_is_the_reference_and_its_bytes_are_the_engine_s(events, loaded_models):
    cfg = loaded_models.get().config
    v = by_variant(events)
    assert v["gqa"]["mean_kl"] == 0 and v["gqa"]["top1_agreement"] == 1
    assert v["gqa"]["kv_bytes_per_token"] == 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 4 == 46_080
    assert v["mqa"]["kv_bytes_per_token"] * cfg.n_kv_heads == v["gqa"]["kv_bytes_per_token"]
    n, window = v["gqa"]["n_tokens"], v["window"]["window"]
    assert v["window"]["kv_bytes_for_prompt"] == min(n, window) * 46_080
    assert v["sinks"]["kv_bytes_for_prompt"] == min(n, window + av.SINK_TOKENS) * 46_080


def test_what_the_lesson_says_holds_on_its_default_prompt(events):
    """Averaging trained key/value heads wrecks the model; a window alone moves it far; the sinks win most back."""
    v = by_variant(events)
    assert v["mqa"]["mean_kl"] > 1 and v["mqa"]["top1_agreement"] < 0.5
    assert v["sinks"]["mean_kl"] < v["window"]["mean_kl"] / 5
    assert v["sinks"]["top1_agreement"] > v["window"]["top1_agreement"]
    # Positions inside the window see everything: nothing changes there.
    assert v["window"]["kl_per_position"][: v["window"]["window"]] == [0.0] * v["window"]["window"]


def test_the_window_mask_keeps_the_last_tokens_and_the_sinks():
    mask = av.window_mask(7, window=2, sinks=1)
    assert mask[6].tolist() == [True, False, False, False, False, True, True]
    assert mask[1].tolist() == [True, True] + [False] * 5
    assert torch.equal(av.window_mask(5, window=5), torch.ones(5, 5, dtype=torch.bool).tril())


def test_the_exercise_s_sinks_case_is_the_demo_s_own_run(events):
    case = next(c for c in kv_budget.CASES if "window 8 + 4 sinks" in c.name)
    sinks = by_variant(events)["sinks"]
    assert (sinks["n_tokens"], sinks["window"], sinks["sink_tokens"]) == (25, 8, 4)
    assert case.expected == sinks["kv_bytes_for_prompt"]


def test_the_budget_has_the_course_s_figures(events):
    budget = {c["model"]: c["bytes_per_token"] for c in events[-1]["configs"]}
    assert budget["Llama 3 8B (GQA, 8 KV heads)"] == 131_072
    assert budget["Llama 3 70B (GQA, 8 KV heads)"] == 320 * 1024
    assert budget["DeepSeek-V3 (MLA latent 512 + 64)"] == 70_272


@pytest.mark.parametrize("params, code", [
    ({"window": 0}, "param_out_of_range"), ({"window": 65}, "param_out_of_range"),
    ({"layer": 30}, "param_out_of_range"), ({"prompt": " "}, "invalid_param"), ({"heads": 2}, "unknown_param"),
])
def test_out_of_range_settings_are_refused_one_by_one(params, code):
    with pytest.raises(DemoParamError) as refused:
        validate("attention-variants", params)
    assert refused.value.code == code
