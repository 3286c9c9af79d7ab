"""Course demo runners (demos/catalog/) on the real engine: prefill vs decode, serving load (FlashAttention: its own file)."""
from __future__ import annotations

import pytest

from demos.catalog.prefill_decode import summarize
from demos.catalog.serving_load import percentile
from inference_core import GenerationParams
from inference_core.engine.trace import TokenStep, validate_event


pytestmark = pytest.mark.usefixtures("one_thread")


def _step(phase, n_in, t, flops, moved):
    return TokenStep(phase=phase, step=0, token_id=1, text="a", position=0, n_input_tokens=n_in, step_time_s=t,
                     kv_bytes_total=0, kv_bytes_per_layer=[0], flops=flops, bytes_moved=moved)


def test_summary_splits_phases():
    steps = [_step("prefill", 100, 0.5, 2e10, 1e9), _step("decode", 1, 0.1, 2e8, 1e9), _step("decode", 1, 0.3, 2e8, 1e9)]
    s = summarize(steps, weight_bytes=10**9)
    validate_event(s.to_dict())
    assert s.ttft_s == 0.5 and s.tpot_s == pytest.approx(0.2) and s.itl_s == [0.1, 0.3]
    assert s.prefill_tokens_per_s == 200 and s.decode_tokens_per_s == pytest.approx(5)
    assert s.prefill_intensity == 20 and s.decode_intensity == pytest.approx(0.2)
    assert s.decode_bytes_per_s == pytest.approx((1e9 / 0.1 + 1e9 / 0.3) / 2)  # median of two steps' GB/s
    assert s.n_generated == 3 and s.n_prompt_tokens == 100


def test_percentile_nearest_rank():
    assert percentile([], 0.5) == 0.0
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.9) == 5.0


@pytest.mark.model
def test_prefill_decode_run_streams_valid_events(engine, loaded_models):
    from demos.catalog.prefill_decode import run

    events = list(run({"prompt": "The capital of France is", "max_new_tokens": 3, "repeat_prompt": 2}, models=loaded_models))
    for ev in events:
        validate_event(ev)
    kinds = [e["type"] for e in events]
    assert kinds == ["run_started", "machine_roofs", "token", "token", "token", "run_finished", "prefill_decode_summary"]
    roofs = events[1]  # this server's measured ceilings (the recorded fallback here: no worker published any)
    assert roofs["bandwidth_bytes_per_s"] > 0 and roofs["peak_flops_per_s"] > 0 and roofs["live"] is False
    summary = events[-1]
    assert summary["n_prompt_tokens"] == len(events[0]["prompt_token_ids"])
    assert summary["prefill_intensity"] > 5 * summary["decode_intensity"]  # prefill reuses each weight per token


@pytest.mark.model
@pytest.mark.parametrize("mode", ["sequential", "batched"])
def test_serving_load_same_text_either_way(engine, mode, loaded_models):
    from demos.catalog.serving_load import run

    events = list(run({"n_requests": 2, "max_new_tokens": 3, "mode": mode}, models=loaded_models))
    for ev in events:
        validate_event(ev)
    done = sorted((e for e in events if e["type"] == "load_request"), key=lambda e: e["request_id"])
    summary = next(e for e in events if e["type"] == "load_summary")
    assert summary["mode"] == mode and summary["output_tokens"] == 6
    assert events[-1]["type"] == "comparison"  # then both modes, timed in alternating repeats
    assert events.index(summary) < min(i for i, e in enumerate(events) if e["type"] == "comparison_sample")
    assert [e["n_generated"] for e in done] == [3, 3]
    params = GenerationParams(max_new_tokens=3, stop_at_eos=False)
    greedy = [engine.tokenizer.decode(engine.generate_ids(engine.encode_prompt(e["prompt"], False), params),
                                      skip_special=True) for e in done]
    assert [e["text"] for e in done] == greedy  # batching changes timing, never the tokens
    for e in done:
        assert e["ttft_s"] >= e["first_token_s"] - e["arrival_s"] - 1e-9 and len(e["itl_s"]) == 2


@pytest.mark.model
def test_a_timed_serving_run_skips_the_gaps_between_arrivals_instead_of_sleeping(engine):
    """The comparison's timed runs hold the engine: waiting 2 s for a request to arrive must not keep it idle, yet the
    time measured is the real clock's, arrival gap included."""
    import time

    from demos.catalog.serving_load import SPEC, timed_side

    params = SPEC.with_defaults({"n_requests": 2, "max_new_tokens": 2, "spacing_s": 2.0})
    for mode in ("batched", "sequential"):
        t0 = time.perf_counter()
        seconds, counters = timed_side(engine, params, mode)
        held = time.perf_counter() - t0
        assert seconds >= 2.0 and held < seconds - 1.5, (mode, seconds, held)
        assert counters["tokens generated"] == 4


def test_overview_model_table_matches_the_real_config():
    """The course overview states SmolLM2-135M's shape; it must be what the engine actually loads."""
    from pathlib import Path

    from inference_core.model.weights import load_config

    cfg = load_config("smollm2-135m")
    text = (Path(__file__).resolve().parents[2] / "content" / "overview.md").read_text()
    rows = {
        "Layers": str(cfg.n_layers), "Hidden size": str(cfg.dim),
        "Query heads / key-value heads": f"{cfg.n_heads} / {cfg.n_kv_heads}", "Head dimension": str(cfg.head_dim),
        "Feed-forward size": f"{cfg.ffn_dim:,}", "Vocabulary": f"{cfg.vocab_size:,} tokens",
        "Parameters": f"{cfg.n_params():,}", "Weights in fp32": f"about {round(cfg.n_params() * 4 / 1e6)} MB",
    }
    for name, value in rows.items():
        assert f"| {name} | {value} |" in text, f"overview.md should state {name} = {value}"


def test_calculator_model_table_matches_the_real_config():
    """static/js/calculators/formulas.js hard-codes SmolLM2-135M's shape (copied from the GGUF); it must be
    what the engine actually loads (the KV-size and GPU-memory calculators compute from these numbers)."""
    import re
    from pathlib import Path

    from inference_core.model.weights import load_config

    cfg = load_config("smollm2-135m")
    source = (Path(__file__).resolve().parents[2] / "static" / "js" / "calculators" / "formulas.js").read_text()
    entry = re.search(r'^\s*"smollm2-135m":\s*\{(?P<body>[^}]*)\}', source, re.M)
    assert entry, "formulas.js MODELS should have a \"smollm2-135m\" entry"
    fields = {key: float(value.replace("_", ""))
              for key, value in re.findall(r"(\w+):\s*([0-9][0-9_.eE+]*)", entry["body"])}
    expected = {"layers": cfg.n_layers, "qHeads": cfg.n_heads, "kvHeads": cfg.n_kv_heads, "headDim": cfg.head_dim,
                "params": cfg.n_params()}
    assert set(expected) <= set(fields), f"formulas.js smollm2-135m entry lacks {set(expected) - set(fields)}"
    for key, value in expected.items():
        assert fields[key] == value, f"formulas.js smollm2-135m {key} = {fields[key]:g}, the GGUF says {value}"
    assert fields["qHeads"] * fields["headDim"] == cfg.dim  # the hidden size the calculators imply
