"""A waiting run is told about how long until it starts (`queued` frames' `eta_s`, docs/protocol.md), from the
workers' measured run times: each demo's typical run (the median of its finished runs), what the runs running now
have left of theirs, and the runs queued ahead. Over a real websocket to Daphne (with Redis, no worker: nothing
takes the run, so it stays queued behind a run that is running), the estimate is the one those times give and it
counts down while the run waits; `queue_starts` itself is checked on a queue of mixed demos."""
from __future__ import annotations

import time
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from demo_stack import Stack
from demos.consumers.common import queue_starts
from test_demos_scaleout import WS


def test_queue_starts_add_the_running_runs_remaining_time_and_the_runs_ahead():
    typical = {"speculative": 30.0, "attention": 4.0}
    # Two slots: a speculative run 10 s in (20 s left), an attention run past its typical time (0.4 s left).
    starts = queue_starts([("speculative", 10.0), ("attention", 9.0)], ["attention", "attention", "kv-cache", "attention"],
                          typical, fallback=12.0)
    assert starts == pytest.approx([0.4, 4.4, 8.4, 20.0])
    assert queue_starts([], ["attention"], typical, fallback=12.0) == [0.0]  # a slot already free


@pytest.fixture
def daphne_without_worker(django_db_setup, tmp_path):
    """Redis and Daphne on free ports with one worker slot and no worker: a started run waits in the queue."""
    stack = Stack(tmp_path, str(settings.DATABASES["default"]["TEST"]["NAME"]),
                  {"DEMO_WORKER_SLOTS": "1", "DEMO_QUEUE_TIMEOUT": "600"})
    try:
        stack.start_redis()
        stack.start_daphne()
        yield stack
    finally:
        stack.stop()


def runs_measured_and_running(redis_url: str) -> str:
    """Three finished speculative runs (28, 30, 32 s: typical 30 s), three quick attention runs (2 s), and a
    speculative run 6 s into its run holding the one slot, with its heartbeat in Redis (so no reaper fails it)."""
    from django.utils import timezone

    import redis

    from demos.models import Run
    from demos.runstate import heartbeat_key

    now = timezone.now()
    for demo, took in [("speculative", 28), ("speculative", 30), ("speculative", 32)] + [("attention", 2)] * 3:
        Run.objects.create(demo=demo, params={}, status=Run.Status.DONE, owner="s:earlier",
                           started_at=now - timedelta(seconds=100 + took), finished_at=now - timedelta(seconds=100))
    busy = Run.objects.create(demo="speculative", params={}, status=Run.Status.RUNNING, owner="s:other",
                              started_at=now - timedelta(seconds=6))
    redis.Redis.from_url(redis_url).set(heartbeat_key(busy.id), "1", ex=120)
    return str(busy.id)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
async def test_a_waiting_run_is_told_about_how_long_and_the_estimate_counts_down(daphne_without_worker,
                                                                                 session_cookie):
    await sync_to_async(runs_measured_and_running)(daphne_without_worker.redis_url)
    (_, cookie), _owner = session_cookie
    ws = await WS.connect(daphne_without_worker.http_port, cookie)
    try:
        await ws.send({"action": "start", "demo": "attention", "params": {"prompt": "Hello there", "layer": 0,
                                                                          "head": 0}, "ref": "r1"})
        accepted = await ws.recv()
        assert accepted["type"] == "accepted", accepted
        first = await ws.recv()
        began = time.monotonic()
        assert first["type"] == "queued" and first["position"] == 1 and first["ahead"] == 0, first
        # The speculative run ahead has about 30 − 6 = 24 s left (a median over every demo's runs, 16 s, and the
        # old "each running run just began" guess, would say otherwise).
        assert 20 <= first["eta_s"] <= 24, first
        frames = [first]
        while time.monotonic() - began < 4.5:
            frame = await ws.recv(timeout=10)
            assert frame["type"] == "queued", frame
            frames.append(frame)
        waited = time.monotonic() - began
        etas = [f["eta_s"] for f in frames]
        assert etas == sorted(etas, reverse=True) and len(set(etas)) >= 3, etas  # counting down, about once a second
        assert first["eta_s"] - etas[-1] == pytest.approx(waited, abs=2.0), (etas, waited)
    finally:
        await ws.close()
