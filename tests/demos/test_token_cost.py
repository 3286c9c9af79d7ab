"""The token-cost demo on the real engine: each point's figures are the scheduler's own run metrics, its price the
lesson's formula, and the summary's choices follow from the points (the same choice the lesson's exercise asks for)."""
from __future__ import annotations

import math

import pytest

from demos.catalog import token_cost as tc
from demos.registry import DemoParamError, validate
from exercises.catalog import token_cost as exercise
from inference_core.engine.trace import validate_event

PARAMS = {"max_batch": 4, "new_tokens": 6, "price_per_hour": 2.5, "target_tpot_ms": 2000.0}


@pytest.fixture(scope="module")
def events(loaded_models):
    return list(tc.run(validate("token-cost", PARAMS), models=loaded_models))


def test_one_point_per_batch_size_then_the_summary(events):
    for ev in events:
        validate_event(ev)
    assert [e.get("batch_size") for e in events[:-1]] == [1, 2, 4] and events[-1]["type"] == "cost_summary"


def test_each_point_is_its_batch_s_tokens_at_the_lesson_s_price(events):
    for point in events[:-1]:
        assert point["output_tokens"] == point["batch_size"] * PARAMS["new_tokens"]
        assert point["output_tokens_per_s"] == pytest.approx(point["output_tokens"] / point["duration_s"])
        assert point["usd_per_million"] == pytest.approx(2.5 / (point["output_tokens_per_s"] * 3600) * 1e6)
        assert 0 < point["tpot_median_s"] < point["duration_s"]


def test_the_summary_chooses_as_the_exercise_s_reference_does(events):
    points, summary = events[:-1], events[-1]
    ns: dict = {}
    exec(exercise.REFERENCE, ns)  # noqa: S102 (our own reference solution)
    measured = [{"batch_size": p["batch_size"], "tokens_per_s": p["output_tokens_per_s"], "tpot_s": p["tpot_median_s"]}
                for p in points]
    assert summary["within_target_batch"] == ns["cheapest_within_target"](measured, 2.5, summary["target_tpot_s"])
    assert summary["cheapest_usd_per_million"] == min(p["usd_per_million"] for p in points)
    assert summary["interactive_usd_per_million"] == points[0]["usd_per_million"]
    assert math.isclose(ns["usd_per_million"](points[0]["output_tokens_per_s"], 2.5), points[0]["usd_per_million"])


def test_batch_sizes_double_up_to_the_largest():
    assert tc.batch_sizes(8) == [1, 2, 4, 8] and tc.batch_sizes(4) == [1, 2, 4]


@pytest.mark.parametrize("params, code", [
    ({"max_batch": 64}, "invalid_param"), ({"new_tokens": 100}, "param_out_of_range"),
    ({"price_per_hour": 0}, "param_out_of_range"), ({"target_tpot_ms": 1}, "param_out_of_range"),
    ({"batch": 2}, "unknown_param"),
])
def test_out_of_range_settings_are_refused_one_by_one(params, code):
    with pytest.raises(DemoParamError) as refused:
        validate("token-cost", params)
    assert refused.value.code == code
