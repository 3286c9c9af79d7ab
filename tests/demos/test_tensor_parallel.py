"""The model-parallelism demo on the real model, across 2 real processes (gloo): token-identical to the engine in one
process, the all-reduces the lesson counts, out-of-range settings refused, and no process left behind whatever ends a
run (its end, Stop, a rank that dies, the caller walking away)."""
from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

import pytest

from demos import tp_worker
from demos.catalog import tensor_parallel as tp
from demos.registry import DemoParamError, validate
from inference_core.engine.trace import validate_event

LESSON = Path(__file__).resolve().parents[2] / "content" / "model-parallelism.md"
HELD_OUT = ("Water boils at a temperature of", "def fibonacci(n):", "My favourite season is autumn because")


def ranks_alive() -> list[int]:
    return [p.pid for p in multiprocessing.active_children() if p.name.startswith("model-parallel-rank-")]


def run(loaded_models, **params) -> list[dict]:
    events = list(tp.run(validate("tensor-parallel", params), models=loaded_models))
    assert ranks_alive() == []
    return events


@pytest.fixture(scope="module")
def tensor_run(loaded_models):
    return run(loaded_models, max_new_tokens=8)


def test_events_validate_in_order(tensor_run):
    for ev in tensor_run:
        validate_event(ev)
    types = [e["type"] for e in tensor_run]
    assert types == ["parallel_plan"] + ["parallel_step"] * 8 + ["parallel_summary"]
    assert tensor_run[0]["backend"] == "gloo" and tensor_run[0]["devices"] == ["cpu", "cpu"]


@pytest.mark.parametrize("prompt", HELD_OUT)
def test_tensor_parallel_tokens_are_one_process_s(loaded_models, prompt):
    from inference_core import GenerationParams

    engine = loaded_models.get()
    alone = engine.generate_ids(engine.encode_prompt(prompt, chat=False), GenerationParams(max_new_tokens=6))
    events = run(loaded_models, prompt=prompt, max_new_tokens=6)
    steps = [e for e in events if e["type"] == "parallel_step"]
    assert [s["token_id"] for s in steps] == alone
    assert all(s["same"] and len({r["token_id"] for r in s["ranks"]}) == 1 for s in steps)  # both ranks agree
    assert events[-1]["identical"] is True


def test_pipeline_tokens_are_one_process_s_with_two_sends_a_step(loaded_models):
    events = run(loaded_models, prompt=HELD_OUT[0], max_new_tokens=5, split="pipeline")
    assert events[0]["ranks"] == [{"rank": 0, "layers": [0, 15]}, {"rank": 1, "layers": [15, 30]}]
    assert events[-1]["identical"] is True
    for step in (e for e in events if e["type"] == "parallel_step"):
        assert [r["collectives"] for r in step["ranks"]] == [2, 2]  # hidden state forward, token back


def test_two_all_reduces_a_layer_as_the_lesson_says(tensor_run, loaded_models):
    cfg = loaded_models.get().config
    plan = tensor_run[0]
    assert plan["collectives_per_layer"] == tp.ALL_REDUCES_PER_LAYER == 2
    for step in (e for e in tensor_run if e["type"] == "parallel_step"):
        assert [r["collectives"] for r in step["ranks"]] == [2 * cfg.n_layers] * 2
        assert all(r["comm_s"] > 0 and r["compute_s"] > 0 for r in step["ranks"])
    assert tensor_run[-1]["collectives_per_step"] == 60
    assert "two all-reduces a layer" in LESSON.read_text().lower()


def test_the_plan_splits_every_head_and_column_once_and_the_weights_nearly_evenly(tensor_run, loaded_models):
    cfg = loaded_models.get().config
    ranks = tensor_run[0]["ranks"]
    assert sorted(h for r in ranks for h in r["query_heads"]) == list(range(cfg.n_heads))
    assert [r["kv_groups"] for r in ranks] == [[0, 1], [2]]
    assert ranks[0]["ffn_columns"][0] == 0 and ranks[0]["ffn_columns"][1] == ranks[1]["ffn_columns"][0]
    assert ranks[1]["ffn_columns"][1] == cfg.ffn_dim
    per_layer = cfg.matmul_params() - cfg.vocab_size * cfg.dim
    assert sum(r["weights"] for r in ranks) * cfg.n_layers == per_layer
    assert abs(ranks[0]["weights"] - ranks[1]["weights"]) < 0.05 * per_layer / cfg.n_layers


def test_the_shards_are_the_engine_s_rows_and_columns(loaded_models):
    engine = loaded_models.get()
    cfg, hd = engine.config, engine.config.head_dim
    plan = tp_worker.tensor_plan(cfg.n_kv_heads, 3, hd, cfg.dim, cfg.ffn_dim)[1]
    shards = tp_worker.tensor_shards(engine.model, plan)
    full = engine.model.layers[4].attention.wqkv.weight
    qkv = shards["layers.4.attention.wqkv.weight"]
    assert qkv.shape == (5 * hd, cfg.dim)  # 3 query heads, 1 key head, 1 value head
    assert qkv[:hd].equal(full[6 * hd:7 * hd])  # query head 6 first
    assert qkv[3 * hd:4 * hd].equal(full[(9 + 2) * hd:(9 + 3) * hd])  # then key head 2
    assert shards["layers.4.feed_forward.w_down.weight"].equal(
        engine.model.layers[4].feed_forward.w_down.weight[:, plan["ffn_columns"][0]:])
    assert "output.weight" not in shards  # tied: rebuilt from the embeddings in the rank


@pytest.mark.parametrize("params, code", [
    ({"max_new_tokens": 0}, "param_out_of_range"), ({"max_new_tokens": 33}, "param_out_of_range"),
    ({"split": "data"}, "invalid_param"), ({"prompt": " "}, "invalid_param"), ({"ranks": 4}, "unknown_param"),
])
def test_out_of_range_settings_are_refused(params, code):
    with pytest.raises(DemoParamError) as refused:
        validate("tensor-parallel", params)
    assert refused.value.code == code


def test_stop_ends_both_ranks(loaded_models):
    seen = []
    stop = lambda: any(e["type"] == "parallel_step" for e in seen)  # noqa: E731
    for ev in tp.run(validate("tensor-parallel", {"max_new_tokens": 32}), stop, models=loaded_models):
        seen.append(ev)
    assert sum(e["type"] == "parallel_step" for e in seen) < 32 and seen[-1]["type"] == "parallel_step"
    assert ranks_alive() == []


def test_a_rank_that_dies_fails_the_run_and_the_other_is_stopped(loaded_models):
    events = tp.run(validate("tensor-parallel", {"max_new_tokens": 32}), models=loaded_models)
    while next(events)["type"] != "parallel_step":
        pass
    survivor = ranks_alive()
    victim = next(p for p in multiprocessing.active_children() if p.name == "model-parallel-rank-1")
    os.kill(victim.pid, signal.SIGKILL)
    with pytest.raises(RuntimeError, match="rank"):
        for _ in events:
            pass
    assert survivor and ranks_alive() == []


def test_a_caller_that_walks_away_leaves_no_rank(loaded_models):
    events = tp.run(validate("tensor-parallel", {"max_new_tokens": 32}), models=loaded_models)
    assert next(events)["type"] == "parallel_plan"
    assert len(ranks_alive()) == 2
    events.close()
    assert ranks_alive() == []
