"""The long-context demo on the real model: its full cache scores the held-out text exactly as the engine's own
perplexity function does, each policy's cache holds exactly `budget` tokens, H2O's eviction is the exercise's
choice, and what the lesson says about the policies holds."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from demos.catalog import long_context as lc
from demos.registry import DemoParamError, validate
from exercises.catalog import heavy_hitters
from inference_core.engine.trace import validate_event
from inference_core.quant.perplexity import compare, heldout_ids

CONTEXT = 128  # the smallest window: its budgets are 64, 32, 16 and 8


@pytest.fixture(scope="module")
def events(loaded_models):
    return list(lc.run(validate("long-context", {"context": CONTEXT}), models=loaded_models))


def points(events) -> dict[tuple[str, int], dict]:
    return {(e["policy"], e["budget"]): e for e in events if e["type"] == "eviction_point"}


def reference_h2o():
    namespace: dict = {}
    exec(heavy_hitters.REFERENCE, namespace)  # noqa: S102 - the exercise's own reference solution
    return namespace["h2o_keep"]


def test_every_event_validates_in_order(events):
    for ev in events:
        validate_event(ev)
    window = events[0]
    assert window["type"] == "context_window" and window["budgets"] == [64, 32, 16, 8]
    assert (window["n_context"], window["n_scored"], len(window["tokens"])) == (CONTEXT, CONTEXT // 2, CONTEXT)
    order = [(e["policy"], e["budget"]) for e in events[1:]]
    assert order == [("full", CONTEXT)] + [(p, b) for b in window["budgets"] for p in lc.POLICIES]


def test_the_full_cache_scores_the_last_tokens_as_the_engine_s_perplexity_function_does(events, loaded_models):
    """The engine's `compare` over the whole window, less its score of the window without the last n_scored
    tokens (causal: the first positions predict the same either way), is the demo's full-cache figure."""
    engine = loaded_models.get()
    ids = heldout_ids(engine.tokenizer, CONTEXT)
    n_scored = CONTEXT // 2
    whole = compare({"m": engine.model}, engine.model, ids, window=CONTEXT)["m"]
    head = compare({"m": engine.model}, engine.model, ids[:CONTEXT - n_scored], window=CONTEXT)["m"]
    assert whole.n - head.n == n_scored
    expected = math.exp((whole.nll_sum - head.nll_sum) / n_scored)
    assert points(events)[("full", CONTEXT)]["perplexity"] == pytest.approx(expected, rel=1e-4)


def test_each_policy_s_cache_holds_exactly_its_budget_at_the_last_token(events):
    for (policy, budget), ev in points(events).items():
        assert len(ev["kept"]) == CONTEXT
        assert sum(ev["kept"]) == pytest.approx(budget, abs=0.05), (policy, budget)
        if policy == "recent":
            assert ev["kept"] == [0.0] * (CONTEXT - budget) + [1.0] * budget
        if policy == "sinks":
            assert ev["kept"][:4] == [1.0] * 4 and ev["kept"][4:CONTEXT - budget + 4] == [0.0] * (CONTEXT - budget)
        if policy == "h2o":  # the recent half is always there
            assert ev["kept"][-(budget - budget // 2):] == [1.0] * (budget - budget // 2)


@pytest.mark.parametrize("budget", [1, 2, 5, 8])
def test_h2o_keeps_exactly_the_budget_each_step_and_an_evicted_token_never_returns(budget):
    scores = np.random.default_rng(budget).normal(size=(6, 20, 20)) * 3
    keep = lc.h2o_keep(scores, budget, group=3)
    assert keep.shape == (2, 20, 20)
    for head in keep:
        assert [int(row.sum()) for row in head] == [min(i + 1, budget) for i in range(20)]
        assert not np.triu(head, 1).any()  # causal: no query sees a later token
        left = np.zeros(20, dtype=bool)
        for i in range(1, 20):
            left |= head[i - 1] & ~head[i]
            assert not (head[i] & left).any(), f"an evicted token came back at step {i}"


def test_the_windows_with_and_without_sinks_keep_exactly_the_budget():
    for budget, sinks in ((8, 0), (8, 4), (16, 1)):
        mask = lc.window_mask(40, budget - sinks, sinks)
        assert [int(r.sum()) for r in mask] == [min(i + 1, budget) for i in range(40)]
        assert mask[39, :sinks].all() and mask[39, 40 - (budget - sinks):].all()


def test_h2o_s_first_eviction_is_the_exercise_s_reference_choice():
    """At the first full step, the token H2O drops is the one the exercise's reference leaves out, given the
    attention accumulated so far (computed here independently, with torch's softmax)."""
    budget, t = 6, 12
    scores = np.random.default_rng(7).normal(size=(1, t, t)) * 2
    keep = lc.h2o_keep(scores, budget, group=1)
    causal = torch.tensor(scores[0, :budget, :budget]).masked_fill(~torch.ones(budget, budget).tril().bool(), -math.inf)
    accumulated = torch.softmax(causal, -1).sum(0).tolist() + [0.0]
    assert np.flatnonzero(keep[0, budget]).tolist() == reference_h2o()(accumulated, budget)


def test_what_the_lesson_says_holds(events):
    """Keeping only the most recent tokens costs the most at every budget; the sinks win most of it back; the
    smaller the cache, the further every policy is from the full one."""
    p = points(events)
    full = p[("full", CONTEXT)]["perplexity"]
    for budget in (64, 32, 16, 8):
        recent = p[("recent", budget)]["perplexity"]
        assert p[("sinks", budget)]["perplexity"] < recent and p[("h2o", budget)]["perplexity"] < recent
        assert min(p[(pol, budget)]["perplexity"] for pol in lc.POLICIES) > full * 0.98
    for policy in ("sinks", "h2o"):
        assert p[(policy, 8)]["perplexity"] > p[(policy, 64)]["perplexity"]


@pytest.mark.parametrize("params, code", [
    ({"context": 127}, "param_out_of_range"), ({"context": 1025}, "param_out_of_range"),
    ({"sinks": 0}, "param_out_of_range"), ({"sinks": 17}, "param_out_of_range"),
    ({"context": 128, "sinks": 8}, "invalid_param"), ({"budget": 64}, "unknown_param"),
])
def test_out_of_range_settings_are_refused_one_by_one(params, code):
    with pytest.raises(DemoParamError) as refused:
        validate("long-context", params)
    assert refused.value.code == code
