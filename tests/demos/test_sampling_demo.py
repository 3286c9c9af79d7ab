"""The sampling demo (demos/catalog/sampling.py, the "Choosing the next token" lesson): its spec refuses settings
out of range (directly and over the real websocket), and its events, from the real model, say what the lesson says:
the drawn token is in the kept set, greedy takes the argmax, the kept set is what top-k, top-p and min-p define, and
a seed repeats the run."""
from __future__ import annotations

import math

import pytest

from demos.catalog.sampling import SPEC, TRACE_TOP, run
from demos.registry import DemoParamError, is_deterministic, validate
from inference_core import validate_event


def events(loaded_models, **params) -> list[dict]:
    out = [validate_event(e) for e in run(validate("sampling", {"max_new_tokens": 6, **params}), models=loaded_models)]
    assert out[0]["type"] == "run_started" and out[-1]["type"] == "run_finished"
    return out


def steps_of(evs: list[dict]) -> list[dict]:
    tokens = [e for e in evs if e["type"] == "token"]
    steps = [e for e in evs if e["type"] == "sampling_step"]
    assert [s["token_id"] for s in steps] == [t["token_id"] for t in tokens]  # one per token, the token drawn
    assert all(len(s["top_ids"]) == len(s["probs"]) == len(s["probs_t"]) == TRACE_TOP for s in steps)
    return steps


@pytest.mark.parametrize("bad, code", [
    ({"temperature": 2.5}, "param_out_of_range"), ({"temperature": -0.1}, "param_out_of_range"),
    ({"top_k": -1}, "param_out_of_range"), ({"top_k": 1001}, "param_out_of_range"),
    ({"top_p": 0}, "param_out_of_range"), ({"top_p": 1.01}, "param_out_of_range"),
    ({"min_p": 1.5}, "param_out_of_range"), ({"repetition_penalty": 0.5}, "param_out_of_range"),
    ({"repetition_penalty": 2.5}, "param_out_of_range"), ({"max_new_tokens": 33}, "param_out_of_range"),
    ({"seed": -1}, "param_out_of_range"), ({"top_p": "0.9"}, "invalid_param"), ({"temperature": float("nan")}, "invalid_param"),
    ({"prompt": "word " * 80}, "param_too_long"), ({"top_q": 0.5}, "unknown_param"),
])
def test_the_spec_refuses_settings_out_of_range(bad, code):
    with pytest.raises(DemoParamError) as refused:
        validate("sampling", bad)
    assert refused.value.code == code


def test_defaults_are_seeded_so_a_busy_server_may_replay_them():
    params = validate("sampling", {})
    assert params == SPEC.defaults() and params["seed"] is not None and params["temperature"] > 0
    assert is_deterministic("sampling", params)
    assert not is_deterministic("sampling", {**params, "seed": None})


@pytest.mark.model
def test_greedy_takes_the_argmax_and_keeps_it_alone(loaded_models):
    for s in steps_of(events(loaded_models, temperature=0.0, seed=None)):
        assert s["rank"] == 0 and s["n_kept"] == 1 and s["kept_mass"] == 1.0
        assert s["logits"][0] == max(s["logits"]) and s["probs_t"][0] == 1.0


@pytest.mark.model
@pytest.mark.parametrize("cut", [{"top_k": 5, "top_p": 1.0}, {"top_p": 0.6}, {"top_p": 1.0, "min_p": 0.2}])
def test_the_kept_set_is_what_each_cut_defines_and_the_drawn_token_is_in_it(loaded_models, cut):
    narrow = 0
    for s in steps_of(events(loaded_models, temperature=1.0, seed=3, **cut)):
        n, p = s["n_kept"], s["probs_t"]  # at temperature 1 after the cut: probs_t == probs
        assert 0 <= s["rank"] < n
        assert p == pytest.approx(s["probs"], abs=1e-6)
        shown = min(n, TRACE_TOP)  # a kept set wider than the list: every listed token is in it
        if "top_k" in cut:
            assert n == 5
        elif "min_p" in cut:  # every token at least min_p × the leader's probability, and no other
            assert p[shown - 1] >= 0.2 * p[0] - 1e-6 and (n >= TRACE_TOP or p[n] < 0.2 * p[0] + 1e-6)
        else:  # the smallest prefix whose mass reaches top_p
            assert sum(p[:shown - 1]) < 0.6 + 1e-5 and (n >= TRACE_TOP or sum(p[:n]) >= 0.6 - 1e-5)
        if n < TRACE_TOP:
            assert s["kept_mass"] == pytest.approx(sum(p[:n]), abs=1e-4)
            narrow += 1
    assert narrow  # the definitions were checked to their edge at least once


@pytest.mark.model
def test_temperature_sharpens_the_distribution_it_reports(loaded_models):
    s = steps_of(events(loaded_models, temperature=0.5, top_p=1.0, max_new_tokens=1))[0]
    z = s["logits"]
    assert s["probs_t"][0] > s["probs"][0]  # below 1: the leader gains
    # the ratio of two tokens' probabilities is e^((z_i − z_j) / T): the reported numbers agree with the logits
    assert s["probs_t"][0] / s["probs_t"][1] == pytest.approx(math.exp((z[0] - z[1]) / 0.5), rel=1e-3)
    assert s["probs"][0] / s["probs"][1] == pytest.approx(math.exp(z[0] - z[1]), rel=1e-3)


@pytest.mark.model
def test_the_same_seed_gives_the_same_tokens_and_the_repetition_penalty_changes_them(loaded_models):
    settings = {"prompt": "One, two, three, one, two, three, one, two,", "temperature": 0.9, "max_new_tokens": 8}
    tokens = lambda evs: [e["token_id"] for e in evs if e["type"] == "token"]  # noqa: E731
    first = tokens(events(loaded_models, seed=21, **settings))
    assert tokens(events(loaded_models, seed=21, **settings)) == first
    penalized = steps_of(events(loaded_models, seed=21, repetition_penalty=2.0, **settings))
    assert [s["token_id"] for s in penalized] != first
    assert penalized[0]["top_texts"][0] != " three"  # every word of the prompt is pushed down


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
async def test_the_socket_refuses_out_of_range_settings_before_a_run_exists(demo_stack):
    from asgiref.sync import sync_to_async
    from demo_helpers import connect, recv, send

    from demos.models import Run

    comm = await connect()
    try:
        for params, code in (({"temperature": 9}, "param_out_of_range"), ({"top_p": 0}, "param_out_of_range"),
                             ({"min_p": -0.5}, "param_out_of_range"), ({"seed": "7"}, "invalid_param")):
            await send(comm, {"action": "start", "demo": "sampling", "params": params})
            frame = await recv(comm)
            assert frame["type"] == "error" and frame["code"] == code, (params, frame)
    finally:
        await comm.disconnect()
    assert await sync_to_async(Run.objects.count)() == 0
