"""The serving-metrics demo (demos/catalog/serving_metrics.py, the "Serving and its metrics" lesson) on the real
engine's batching service: every figure it reports is the one its own streamed timestamps give (TTFT = first token −
arrival, TPOT, ITL, end-to-end latency, nearest-rank percentiles, goodput under the SLO, Little's law), its arrivals
are the seeded Poisson process, a stopped run leaves nothing on the service, and settings out of range are refused
(directly and over the real websocket)."""
from __future__ import annotations

import math
import time

import pytest

from demos.catalog import serving_metrics as sm
from demos.registry import DemoParamError, validate
from inference_core import validate_event
from labs.metrics import metrics_for

PARAMS = {"rate_per_s": 4.0, "duration_s": 5.0, "max_new_tokens": 4, "seed": 3, "ttft_slo_s": 0.5, "tpot_slo_s": 0.2}


def nearest_rank(values: list[float], q: float) -> float:
    ranked = sorted(values)
    return ranked[max(1, math.ceil(q * len(ranked) - 1e-9)) - 1]


@pytest.fixture(scope="module")
def events(loaded_models) -> list[dict]:
    return [validate_event(e) for e in sm.run(validate("serving-metrics", PARAMS), models=loaded_models)]


def phases(events) -> dict[int, dict[str, dict]]:
    by_request: dict[int, dict[str, dict]] = {}
    for e in events:
        if e["type"] == "serving_request":
            assert e["phase"] not in by_request.setdefault(e["request_id"], {}), "a moment streamed twice"
            by_request[e["request_id"]][e["phase"]] = e
    return by_request


@pytest.mark.model
def test_each_request_streams_its_arrival_first_token_and_finish_in_that_order(events):
    assert events[-1]["type"] == "serving_metrics_summary"
    assert all(e["type"] == "serving_request" for e in events[:-1])
    seen: dict[int, list[str]] = {}
    for e in events[:-1]:
        seen.setdefault(e["request_id"], []).append(e["phase"])
    assert all(p == ["arrived", "first_token", "finished"] for p in seen.values())
    assert sorted(seen) == list(range(events[-1]["n_requests"]))
    assert events[-1]["n_finished"] == events[-1]["n_requests"]


@pytest.mark.model
def test_arrivals_are_the_seeded_poisson_process_sent_on_time(events):
    planned = sm.arrival_times(PARAMS["rate_per_s"], PARAMS["duration_s"], PARAMS["seed"])
    assert planned == sm.arrival_times(PARAMS["rate_per_s"], PARAMS["duration_s"], PARAMS["seed"])
    assert planned[0] == 0 and all(t < PARAMS["duration_s"] for t in planned)
    arrived = [e for e in events if e.get("phase") == "arrived"]
    assert [e["request_id"] for e in arrived] == list(range(len(planned)))
    for e, t in zip(arrived, planned):  # sent when its time came, whatever the earlier requests were doing
        assert t <= e["t_s"] < t + 0.5


@pytest.mark.model
def test_every_request_figure_is_its_own_timestamps(events):
    for rid, p in phases(events).items():
        arrived, first, done = p["arrived"]["t_s"], p["first_token"]["t_s"], p["finished"]
        tokens = done["token_s"]
        assert len(tokens) == len(done["batch_sizes"]) == PARAMS["max_new_tokens"]
        assert tokens == sorted(tokens) and tokens[0] == first and tokens[-1] == done["t_s"]
        assert p["first_token"]["ttft_s"] == done["ttft_s"] == pytest.approx(first - arrived)
        assert done["e2e_s"] == pytest.approx(done["t_s"] - arrived)
        assert done["tpot_s"] == pytest.approx((done["t_s"] - first) / (len(tokens) - 1))
        assert done["met_slo"] == (done["ttft_s"] <= PARAMS["ttft_slo_s"] and done["tpot_s"] <= PARAMS["tpot_slo_s"])
        assert all(b >= 1 for b in done["batch_sizes"])


@pytest.mark.model
def test_the_summary_is_computed_from_the_same_timestamps(events):
    done = [p["finished"] for p in phases(events).values()]
    s = events[-1]
    span = max(d["t_s"] for d in done)
    ttft, tpot, e2e = ([d[k] for d in done] for k in ("ttft_s", "tpot_s", "e2e_s"))
    itl = [b - a for d in done for a, b in zip(d["token_s"], d["token_s"][1:])]
    assert s["span_s"] == span and s["output_tokens"] == len(done) * PARAMS["max_new_tokens"]
    assert s["throughput_tokens_per_s"] == pytest.approx(s["output_tokens"] / span)
    for name, values in (("ttft", ttft), ("tpot", tpot), ("itl", itl), ("e2e", e2e)):
        for q in (50, 99):
            assert s[f"{name}_p{q}_s"] == pytest.approx(nearest_rank(values, q / 100)), (name, q)
    assert s["ttft_mean_s"] == pytest.approx(sum(ttft) / len(ttft))
    good = [d for d in done if d["ttft_s"] <= s["ttft_slo_s"] and d["tpot_s"] <= s["tpot_slo_s"]]
    assert s["n_met_slo"] == len(good) and s["goodput_requests_per_s"] == pytest.approx(len(good) / span)
    # Little's law: the time-average number of requests in the system is the rate they completed × their latency.
    assert s["mean_in_flight"] == pytest.approx(s["requests_per_s"] * s["e2e_mean_s"])
    assert 1 <= s["max_in_flight"] <= s["n_requests"] and s["slots"] == 16
    assert max(e["in_flight"] for e in events[:-1]) == s["max_in_flight"]


@pytest.mark.model
def test_the_lab_reads_its_metrics_from_the_summary(events):
    metrics, s = metrics_for("serving-metrics"), events[-1]
    assert metrics["ttft_p99_ms"].read(s, "") == pytest.approx(1000 * s["ttft_p99_s"])
    assert metrics["goodput_requests_per_s"].read({**s, "goodput_requests_per_s": 0}, "") == 0.0
    assert metrics["throughput_tokens_per_s"].read({**s, "throughput_tokens_per_s": None}, "") is None


def tracked(rid: int, arrival: float, tokens: list[float]) -> sm.Tracked:
    return sm.Tracked(rid, "p", [1, 2], arrival_s=arrival, token_s=tokens, batch_sizes=[1] * len(tokens))


def test_goodput_counts_only_requests_that_met_both_targets_per_second_of_the_run():
    done = [tracked(0, 0.0, [0.2, 0.3, 0.4]),  # TTFT 0.2, TPOT 0.1: met both
            tracked(1, 0.5, [1.5, 1.6, 1.7]),  # TTFT 1.0: too late to start
            tracked(2, 1.0, [1.1, 2.1, 4.0])]  # TPOT 1.45: too slow to stream; the run ends at 4.0 s
    s = sm.summarize(done, {**PARAMS, "ttft_slo_s": 0.5, "tpot_slo_s": 0.2}, 3, 16, 2).to_dict()
    assert s["n_met_slo"] == 1 and s["span_s"] == 4.0
    assert s["goodput_requests_per_s"] == 0.25 and s["requests_per_s"] == 0.75
    assert s["throughput_tokens_per_s"] == 9 / 4.0
    assert s["ttft_mean_s"] == pytest.approx(1.3 / 3) and s["ttft_p50_s"] == pytest.approx(0.2)
    assert s["ttft_p99_s"] == pytest.approx(1.0)


def test_percentiles_are_nearest_rank_and_a_mean_hides_the_tail():
    values = [0.1] * 19 + [5.0]
    assert sm.percentile(values, 0.5) == 0.1 and sm.percentile(values, 0.99) == 5.0
    assert sm.percentile(values, 0.95) == 0.1  # 19 of 20 are at or below 0.1
    assert sum(values) / len(values) == pytest.approx(0.345)  # the mean describes no request
    assert sm.percentile([3.0], 0.99) == 3.0 and sm.percentile([], 0.5) == 0.0
    assert sm.percentile([float(i) for i in range(1, 101)], 0.99) == 99.0


@pytest.mark.model
def test_a_stopped_run_ends_at_once_and_leaves_nothing_on_the_service(loaded_models):
    seen: list[dict] = []
    t0 = time.monotonic()
    for e in sm.run(validate("serving-metrics", {"rate_per_s": 8.0, "duration_s": 10.0}), lambda: len(seen) >= 3,
                    models=loaded_models):
        seen.append(e)
    assert len(seen) == 3 and time.monotonic() - t0 < 8
    service = loaded_models.existing_service()
    deadline = time.monotonic() + 10
    while (service.stats.running or service.stats.waiting) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert service.stats.running == 0 and service.stats.waiting == 0


@pytest.mark.parametrize("bad, code", [
    ({"rate_per_s": 0.4}, "param_out_of_range"), ({"rate_per_s": 8.5}, "param_out_of_range"),
    ({"duration_s": 4}, "param_out_of_range"), ({"duration_s": 21}, "param_out_of_range"),
    ({"max_new_tokens": 1}, "param_out_of_range"), ({"max_new_tokens": 17}, "param_out_of_range"),
    ({"ttft_slo_s": 0}, "param_out_of_range"), ({"tpot_slo_s": 6}, "param_out_of_range"),
    ({"seed": -1}, "param_out_of_range"), ({"rate_per_s": "4"}, "invalid_param"),
    ({"rate_per_s": 8.0, "duration_s": 20.0}, "invalid_param"),  # 160 expected requests: more than a run holds
    ({"concurrency": 4}, "unknown_param"),
])
def test_the_spec_refuses_settings_out_of_range(bad, code):
    with pytest.raises(DemoParamError) as refused:
        validate("serving-metrics", bad)
    assert refused.value.code == code


def test_the_page_reads_the_request_budget_from_the_spec():
    limits = sm.SPEC.describe()["params"]["rate_per_s"]["limits"]
    assert limits == {"max_expected_requests": sm.MAX_EXPECTED_REQUESTS}
    validate("serving-metrics", {"rate_per_s": 8.0, "duration_s": 10.0})  # exactly the budget: accepted


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
async def test_the_socket_refuses_out_of_range_settings_before_a_run_exists(demo_stack):
    from asgiref.sync import sync_to_async
    from demo_helpers import connect, recv, send

    from demos.models import Run

    comm = await connect()
    try:
        for params, code in (({"rate_per_s": 50}, "param_out_of_range"), ({"duration_s": 600}, "param_out_of_range"),
                             ({"rate_per_s": 6, "duration_s": 20}, "invalid_param")):
            await send(comm, {"action": "start", "demo": "serving-metrics", "params": params})
            frame = await recv(comm)
            assert frame["type"] == "error" and frame["code"] == code, (params, frame)
    finally:
        await comm.disconnect()
    assert await sync_to_async(Run.objects.count)() == 0


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(240)
async def test_a_live_run_through_the_worker_streams_every_moment_then_its_summary(demo_stack):
    """Websocket → consumer → the real worker, whose task thread runs the load test without the engine's lock while
    its request threads wait on the worker's batching service."""
    from asgiref.sync import sync_to_async
    from demo_helpers import collect, connect, events_of, start

    from demos.models import Run, RunEvent

    comm = await connect()
    try:
        run_id = await start(comm, {"rate_per_s": 2.0, "duration_s": 5.0, "max_new_tokens": 3},
                             demo="serving-metrics")
        frames = await collect(comm, timeout=180)
    finally:
        await comm.disconnect()
    assert frames[-1]["type"] == "done" and frames[-1]["status"] == "done", frames[-1]
    events = [f["event"] for f in events_of(frames)]
    summary = events[-1]
    assert summary["type"] == "serving_metrics_summary" and summary["n_finished"] == summary["n_requests"]
    assert [e["phase"] for e in events[:-1]].count("finished") == summary["n_requests"]
    assert summary["output_tokens"] == 3 * summary["n_requests"]
    stored = await sync_to_async(RunEvent.objects.filter(run_id=run_id).count)()
    assert stored == len(events)
    assert (await sync_to_async(Run.objects.get)(pk=run_id)).status == Run.Status.DONE
