"""Every demo that compares two settings, run at its defaults through its runner: both sides timed in alternating
repeats, the median and spread per side, and the deterministic counters going the way the lesson says. Nothing
here depends on the clock beyond "a time is positive": the counters are the mechanism, the same on any machine.
(How often the clock agrees, idle and beside 8 concurrent runs, is bench/comparisons.py's job, not CI's.)"""
from __future__ import annotations

import statistics

import pytest

from demos.catalog import DEMOS
from demos.catalog.comparison import IQR_FROM, Side, compare, interleave, summarize
from inference_core.engine.trace import validate_event

# demo → (the sides' labels in order, the side the lesson says is faster at the defaults, extra params)
COMPARISONS = {
    "kv-cache": (("with the cache", "without the cache"), "with the cache", {}),
    "prefix-caching": (("without the cache", "with the prefix cache"), "with the prefix cache", {}),
    "batching": (("continuous", "static"), "continuous", {}),
    "speculative": (("plain decoding", "speculative"), "speculative", {}),
    "flash-attention": (("naive", "tiled"), "naive", {}),  # ~60 tokens: the Python tile loop loses (the lesson)
    "quantization": (("fp32", "int4-g128"), "int4-g128", {}),
    "serving-load": (("batched", "sequential"), "batched", {}),
}


def counters_of(comparison: dict) -> dict[str, dict]:
    return {s["label"]: s["counters"] for s in comparison["sides"]}


# What each lesson says the counters do (the mechanism behind the time), as a check on label → counters.
def kv_cache(c):
    assert c["with the cache"]["tokens computed in the step"] == 1
    assert c["without the cache"]["tokens computed in the step"] >= 16  # the whole sequence, recomputed
    assert c["with the cache"]["KV bytes read from the cache"] > 0 == c["without the cache"]["KV bytes read from the cache"]


def prefix_caching(c):
    without, cached = c["without the cache"], c["with the prefix cache"]
    assert cached["prompt tokens prefilled"] < without["prompt tokens prefilled"] / 2  # 3 questions, one long prompt
    assert cached["KV blocks shared"] > 0 == without["KV blocks shared"]
    assert (cached["prompt tokens prefilled"] + cached["prompt tokens served from the cache"]
            == without["prompt tokens prefilled"])  # the same prompts, split between computed and reused


def batching(c):
    key = "steps requests waited before their first pass"
    assert c["continuous"][key] < c["static"][key]
    assert c["continuous"]["forward passes"] < c["static"]["forward passes"]


def speculative(c):
    plain, spec = c["plain decoding"], c["speculative"]
    assert spec["tokens"] == plain["tokens"]
    assert spec["target forward passes"] <= plain["target forward passes"] / 2  # copying: the n-gram draft is right
    assert spec["draft forward passes"] == 0  # an n-gram lookup runs no model


def flash_attention(c):
    assert c["tiled"]["score bytes held"] < c["naive"]["score bytes held"] / 4
    assert c["tiled"]["tiles skipped (masked)"] > 0


def quantization(c):
    assert c["int4-g128"]["weight bytes read per step"] < c["fp32"]["weight bytes read per step"] / 4


def serving_load(c):
    batched, sequential = c["batched"], c["sequential"]
    assert batched["tokens generated"] == sequential["tokens generated"]
    assert sequential["forward passes"] == sequential["tokens generated"]  # one token per pass, one request at a time
    assert sequential["most sequences sharing one forward pass"] == 1
    # The defaults: 5 requests arriving together, 6 tokens each, 2 batch slots: three pairs' worth of passes
    # (the last "pair" is one request), and a queue while the first pairs run.
    assert batched["most sequences sharing one forward pass"] == 2
    assert sequential["forward passes"] == 5 * 6 and batched["forward passes"] == 3 * 6


MECHANISM = {"kv-cache": kv_cache, "prefix-caching": prefix_caching, "batching": batching,
             "speculative": speculative, "flash-attention": flash_attention, "quantization": quantization,
             "serving-load": serving_load}


@pytest.fixture(scope="module")
def one_thread_module():
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def run_demo(name: str, params: dict, models) -> list[dict]:
    events = list(DEMOS[name].load_runner()(params, models=models))
    for ev in events:
        validate_event(ev)
    return events


@pytest.mark.model
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(COMPARISONS))
def test_comparison_demo_at_its_defaults_holds(name, one_thread_module, loaded_models):
    labels, claim, params = COMPARISONS[name]
    events = run_demo(name, params, loaded_models)
    comparisons = [e for e in events if e["type"] == "comparison"]
    assert len(comparisons) == 1, name
    comp = comparisons[0]
    assert tuple(s["label"] for s in comp["sides"]) == labels
    assert comp["claim"] == claim, "at its defaults the lesson claims a direction"
    assert comp["repeats"] >= 3
    for side in comp["sides"]:
        times = side["times_s"]
        assert len(times) >= comp["repeats"] and all(t > 0 for t in times)
        assert side["low_s"] <= side["median_s"] == statistics.median(times) <= side["high_s"]
    assert comp["faster"] in labels
    assert comp["other_sequences"] >= 0
    MECHANISM[name](counters_of(comp))

    samples = [e for e in events if e["type"] == "comparison_sample"]
    if name != "quantization":  # its interleaved quant_token steps are the samples
        assert [s["side"] for s in samples[:4]] == [labels[0], labels[1], labels[1], labels[0]]  # A B, B A
        for label in labels:  # deterministic: every repeat counts the same
            assert len({repr(s["counters"]) for s in samples if s["side"] == label}) == 1
        assert len(samples) == 2 * comp["repeats"]
        assert events.index(comp) > max(events.index(s) for s in samples)


@pytest.mark.model
@pytest.mark.timeout(300)
def test_kv_cache_comparison_holds_the_engine_lock_only_after_the_served_generation(one_thread_module, loaded_models):
    """The cached generation goes through the batching service (no engine lock, so students share forward passes);
    the comparison after it runs the engine directly, so the worker must take the lock for those steps."""
    from demos.catalog import kv_cache

    stream = kv_cache.run({"max_new_tokens": 4}, models=loaded_models)
    seen = []
    for ev in stream:
        seen.append((ev["type"], stream.needs_engine_lock))
    first_sample = next(i for i, (t, _) in enumerate(seen) if t == "comparison_sample")
    assert all(not lock for _, lock in seen[: [t for t, _ in seen].index("run_finished")])
    assert all(lock for _, lock in seen[first_sample:])
    assert seen[-1][0] == "comparison"


@pytest.mark.model
@pytest.mark.timeout(300)
def test_a_comparison_whose_lesson_makes_no_claim_says_so(one_thread_module, loaded_models):
    """One question reuses nothing, the cache or not: the lesson makes no claim, and no block is shared."""
    events = run_demo("prefix-caching", {"questions": "How much does printing cost?", "max_new_tokens": 1},
                      loaded_models)
    comp = next(e for e in events if e["type"] == "comparison")
    assert comp["claim"] == ""
    assert counters_of(comp)["with the prefix cache"]["KV blocks shared"] == 0


@pytest.mark.model
@pytest.mark.timeout(300)
def test_one_request_shares_no_forward_pass_so_serving_makes_no_claim(one_thread_module, loaded_models):
    """Batched or not, a lone request runs the same passes: the lesson claims nothing, and the verdict says so."""
    events = run_demo("serving-load", {"n_requests": 1, "max_new_tokens": 2}, loaded_models)
    comp = next(e for e in events if e["type"] == "comparison")
    assert comp["claim"] == ""
    c = counters_of(comp)
    assert c["batched"]["forward passes"] == c["sequential"]["forward passes"] == 2
    assert c["batched"]["most sequences sharing one forward pass"] == 1


# --- the measurement itself, without a model -------------------------------------------------------------------

def test_sides_alternate_and_counters_ride_along():
    order = []

    def side(label, t):
        return Side(label, lambda: (order.append(label) or t, {"passes": len(label)}))

    samples = list(interleave(side("a", 0.1), side("bb", 0.2), repeats=3))
    assert order == ["a", "bb", "bb", "a", "a", "bb"]
    assert [s.repeat for s in samples] == [0, 0, 1, 1, 2, 2]
    assert {s.side: s.counters for s in samples} == {"a": {"passes": 1}, "bb": {"passes": 2}}


def test_within_noise_exactly_when_the_spreads_overlap():
    apart = summarize("t", ("a", "b"), {"a": [1.0, 1.1, 1.2], "b": [2.0, 2.5, 3.0]}, {}, claim="a")
    assert (apart.faster, apart.within_noise, apart.spread) == ("a", False, "min–max")
    overlap = summarize("t", ("a", "b"), {"a": [1.0, 1.1, 2.1], "b": [2.0, 2.5, 3.0]}, {}, claim="a")
    assert (overlap.faster, overlap.within_noise) == ("a", True)
    validate_event(overlap.to_dict())
    with pytest.raises(ValueError, match="claim"):
        summarize("t", ("a", "b"), {"a": [1.0], "b": [2.0]}, {}, claim="c")


def test_many_samples_use_the_interquartile_range_so_one_stray_step_does_not_hide_a_difference():
    fast = [0.010] * (IQR_FROM - 1) + [0.090]  # one step caught behind another process
    slow = [0.030] * IQR_FROM
    comp = summarize("step", ("q", "fp32"), {"q": fast, "fp32": slow}, {})
    assert comp.spread == "IQR" and not comp.within_noise and comp.faster == "q"
    assert summarize("step", ("q", "fp32"), {"q": fast[:3] + [0.09], "fp32": slow[:4]}, {}).within_noise  # min–max


def test_a_stopped_comparison_sends_samples_but_no_verdict():
    calls = []
    stop_after = 3

    def should_stop():
        return len(calls) >= stop_after

    def side(label):
        return Side(label, lambda: (calls.append(label) or 0.1, {}))

    events = list(compare(side("a"), side("b"), metric="t", should_stop=should_stop))
    assert [e["type"] for e in events] == ["comparison_sample"] * 3
    stop_after = 1
    calls.clear()
    assert [e["type"] for e in compare(side("a"), side("b"), metric="t", should_stop=should_stop)] == [
        "comparison_sample"]
