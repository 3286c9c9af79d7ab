"""The exercises of continuous-batching, flash-attention, gpu-bandwidth, prefix-caching and serving: each one's
expected values are checked against the real thing (the engine's Scheduler, prefix cache and metrics, torch's
attention, the model's own config), its reference solution passes in the real sandbox, and a typical wrong solution
fails with the failing input, expected value and its own result shown."""
from __future__ import annotations

import math

import pytest
import torch

from exercises import catalog
from exercises.catalog import batch_scheduler, decode_bandwidth, online_softmax, prefix_hits, serving_metrics
from exercises.runner import evaluate
from inference_core.engine.metrics import request_metrics, step_cost
from inference_core.engine.request import Request
from inference_core.engine.scheduler import Scheduler, SchedulerConfig
from inference_core.model.sampling import SamplingParams
from inference_core.model.weights import load_config

MODULE_EXERCISES = {"batch-scheduler", "online-softmax", "decode-bandwidth", "prefix-cache-hits", "serving-metrics"}
TOKEN = 100  # what the stand-in model "generates": never the end-of-sequence token


def engine_steps(scheduler: Scheduler) -> None:
    """Run the real scheduler to the end, a fixed token standing in for the model's output."""
    while scheduler.has_work():
        batch = scheduler.schedule()
        assert batch is not None
        scheduler.postprocess(batch, [TOKEN] * len(batch.requests), 0.0)


@pytest.fixture(scope="module")
def smollm2():
    return load_config("smollm2-135m")


def test_every_module_exercise_is_in_the_catalog():
    assert MODULE_EXERCISES <= set(catalog.EXERCISES)


@pytest.mark.parametrize("case", batch_scheduler.CASES, ids=lambda c: c.name)
def test_batch_scheduler_expected_steps_are_the_engine_scheduler_s(case, smollm2):
    lens, slots = case.call["args"]
    mode = "continuous" if case.call["kwargs"]["continuous"] else "static"
    scheduler = Scheduler(smollm2, SchedulerConfig(mode=mode, max_num_seqs=slots), trace=False)
    for i, n in enumerate(lens):
        scheduler.add_request(Request(f"r{i}", [1, 5, 9, 13], SamplingParams(max_new_tokens=n, stop_at_eos=False)))
    finished_at: dict[str, int] = {}
    while scheduler.has_work():
        batch = scheduler.schedule()
        scheduler.postprocess(batch, [TOKEN] * len(batch.requests), 0.0)
        for req in scheduler.finished:
            finished_at.setdefault(req.request_id, scheduler.step_count)
    assert [finished_at[f"r{i}"] for i in range(len(lens))] == case.expected


@pytest.mark.parametrize("case", prefix_hits.CASES, ids=lambda c: c.name)
def test_prefix_hits_expected_tokens_are_the_engine_prefix_cache_s(case, smollm2):
    """Each cached prompt runs through the engine's scheduler with prefix caching (its full blocks are published),
    then the new prompt is admitted and the tokens it was served from the cache are read."""
    cached, prompt, block_size = case.call["args"]
    scheduler = Scheduler(smollm2, SchedulerConfig(block_size=block_size, num_blocks=512, prefix_caching=True),
                          trace=False)
    for i, old in enumerate(cached):
        scheduler.add_request(Request(f"old{i}", list(old), SamplingParams(max_new_tokens=1, stop_at_eos=False)))
        engine_steps(scheduler)
    new = Request("new", list(prompt), SamplingParams(max_new_tokens=1, stop_at_eos=False))
    scheduler.add_request(new)
    scheduler.schedule()
    assert new.num_cached_tokens == case.expected


@pytest.mark.parametrize("case", serving_metrics.CASES, ids=lambda c: c.name)
def test_serving_expected_figures_are_the_engine_metrics(case):
    """TTFT, TPOT and e2e as the engine's request_metrics (vLLM's definitions) gives them for the same times."""
    def engine(arrival, tokens):
        req = Request("r", [1], arrival_time=arrival, token_times=list(tokens), finished_time=tokens[-1])
        return request_metrics(req)

    if case.call["fn"] == serving_metrics.METRICS:
        arrival, tokens = case.call["args"]
        got = engine(arrival, tokens)
        assert {k: got[f"{k}_s"] for k in ("ttft", "tpot", "e2e")} == pytest.approx(case.expected, rel=1e-12)
        return
    requests, ttft_slo, tpot_slo = case.call["args"]
    figures = [engine(r["arrival"], r["tokens"]) for r in requests]
    duration = max(r["tokens"][-1] for r in requests) - min(r["arrival"] for r in requests)
    good = sum(1 for f in figures if f["ttft_s"] <= ttft_slo and f["tpot_s"] <= tpot_slo)
    assert good / duration == pytest.approx(case.expected, rel=1e-12)
    if "2 of 4" in case.name:
        assert good == 2 and duration == pytest.approx(1.75)


@pytest.mark.parametrize("case", [c for c in online_softmax.CASES if c.call["fn"] == online_softmax.ATTEND],
                         ids=lambda c: c.name)
def test_online_softmax_expected_outputs_are_torch_attention(case):
    q, keys, values, _tile = case.call["args"]
    exact = torch.nn.functional.scaled_dot_product_attention(
        torch.tensor([[q]], dtype=torch.float64), torch.tensor([keys], dtype=torch.float64),
        torch.tensor([values], dtype=torch.float64))
    assert case.expected == pytest.approx(exact[0, 0].tolist(), rel=1e-9, abs=1e-12)


def test_online_softmax_states_fold_to_the_whole_row():
    """Folding tiles one after another with the expected-state rule gives exact softmax weights' sums."""
    scores, values = [0.3, 2.0, -1.0, 5.0, 4.5], [[1.0], [2.0], [3.0], [4.0], [5.0]]
    state = None
    for start in (0, 2, 4):
        state = online_softmax.folded(state, scores[start:start + 2], values[start:start + 2])
    m, l, acc = state
    weights = torch.softmax(torch.tensor(scores, dtype=torch.float64), 0)
    expected = float(weights @ torch.tensor([1.0, 2, 3, 4, 5], dtype=torch.float64))
    assert m == 5.0 and acc[0] / l == pytest.approx(expected)
    assert l == pytest.approx(sum(math.exp(s - 5.0) for s in scores))


def test_decode_bandwidth_figures_are_the_engine_step_cost(smollm2):
    """Our model's matmul parameters and the bytes of one decode step over 1,000 cached tokens in fp32 are the
    engine's own figures (ModelConfig, metrics.step_cost)."""
    assert decode_bandwidth.SMOLLM2_MATMUL_PARAMS == smollm2.matmul_params()
    hf = decode_bandwidth.SMOLLM2
    assert (hf["num_hidden_layers"], hf["num_attention_heads"], hf["num_key_value_heads"], hf["hidden_size"]) == (
        smollm2.n_layers, smollm2.n_heads, smollm2.n_kv_heads, smollm2.dim)
    case = next(c for c in decode_bandwidth.CASES if c.name.startswith("SmolLM2-135M in fp32"))
    _flops, engine_bytes = step_cost(smollm2, 1, 1000, 4, kv_cached=True)
    assert case.expected == engine_bytes


WRONG = {  # a typical wrong solution per exercise, and a visible test it must fail
    "batch-scheduler": (batch_scheduler.STARTER, "continuous: 2 slots, outputs of 5, 1, 1"),
    "online-softmax": (online_softmax.STARTER, "a tile that raises the running maximum from 1 to 3"),
    "decode-bandwidth": (decode_bandwidth.STARTER, "Llama 3 8B, bf16, 4,096 tokens of context (GQA: 8 K/V heads)"),
    "prefix-cache-hits": (prefix_hits.STARTER, "the same tokens after a different beginning are not cached"),
    "serving-metrics": (serving_metrics.STARTER, "11 tokens: 250 ms to the first, then one every 40 ms"),
}


@pytest.mark.parametrize("exercise_id", sorted(MODULE_EXERCISES))
def test_reference_passes_and_a_typical_wrong_solution_shows_its_failing_input(exercise_id, sandbox_ready):
    exercise = catalog.get(exercise_id)
    assert evaluate(exercise, exercise.reference)["passed"]
    code, failing = WRONG[exercise_id]
    result = evaluate(exercise, code)
    assert not result["passed"] and result["problem"] == ""
    test = next(t for t in result["tests"] if t["name"] == failing)
    assert not test["passed"]
    case = next(c for c in exercise.cases if c.name == failing)
    assert test["input"].startswith(case.call["fn"] + "(")
    assert test["input"] and test["expected"] and test["got"] and test["got"] != test["expected"]
    assert test["message"]


def test_the_typical_wrong_answers_say_what_was_wrong(sandbox_ready):
    serving = evaluate(catalog.get("serving-metrics"), serving_metrics.STARTER)
    tpot = next(t for t in serving["tests"] if t["name"].startswith("11 tokens"))
    assert "'tpot': expected 0.04" in tpot["message"] and "(e2e − ttft) / (n − 1)" in tpot["message"]
    assert "serving_metrics" not in tpot["input"] and tpot["input"].startswith("request_metrics(0.0, [0.25, 0.29")
    bandwidth = evaluate(catalog.get("decode-bandwidth"), decode_bandwidth.STARTER)
    gqa = next(t for t in bandwidth["tests"] if t["name"].startswith("Llama 3 8B, bf16, 4,096"))
    assert "num_key_value_heads" in gqa["message"] and gqa["expected"] == repr(16_596_870_912.0)
