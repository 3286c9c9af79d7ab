"""Issue 8: persistence, resume, cancellation, a dying worker, limits, replay, isolation."""
from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from demos.models import Run, RunEvent

from demo_helpers import (assert_contiguous, assert_ends_with_the_run_then_its_comparison, collect, connect,
                          events_of, get_run, recv, send, start, stored_seqs, wait_for)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

SHORT = {"prompt": "The capital of France is", "max_new_tokens": 12, "temperature": 0.0}
# No cache: every step re-reads the whole sequence, so the run lasts long enough to interrupt.
LONG = {"prompt": "Once upon a time, in a small village by the sea,", "max_new_tokens": 64,
        "use_cache": False, "temperature": 0.0}


async def test_resume_after_disconnect_delivers_the_rest_without_gaps_or_duplicates(demo_stack, session_cookie):
    cookie, _owner = session_cookie
    comm = await connect(cookie)
    run_id = await start(comm, SHORT)
    first = await collect(comm, stop=lambda f: f["type"] == "event" and f["seq"] >= 3)
    await comm.disconnect()
    seen = events_of(first)
    last = seen[-1]["seq"]
    await asyncio.sleep(0.5)  # the run goes on while nobody listens

    comm2 = await connect(cookie)
    try:
        await send(comm2, {"action": "resume", "run_id": run_id, "after_seq": last})
        resumed = await recv(comm2)
        assert resumed["type"] == "resumed" and resumed["after_seq"] == last
        rest = await collect(comm2)
    finally:
        await comm2.disconnect()
    assert rest[-1]["type"] == "done", rest[-1]
    events = seen + events_of(rest)
    assert_contiguous(events)
    assert_ends_with_the_run_then_its_comparison(events)
    assert [e["seq"] for e in events] == await stored_seqs(run_id)


async def test_resume_of_a_finished_run_replays_from_storage(demo_stack, session_cookie):
    cookie, _ = session_cookie
    comm = await connect(cookie)
    try:
        run_id = await start(comm, {**SHORT, "max_new_tokens": 4})
        original = events_of(await collect(comm))
        await send(comm, {"action": "resume", "run_id": run_id, "after_seq": -1})
        assert (await recv(comm))["status"] == "done"
        again = await collect(comm)
    finally:
        await comm.disconnect()
    assert [e["event"] for e in events_of(again)] == [e["event"] for e in original]
    assert again[-1]["type"] == "done"


async def test_no_event_of_one_users_run_reaches_another(demo_stack, session_cookie):
    cookie, _ = session_cookie
    from django.contrib.sessions.backends.db import SessionStore

    other = await sync_to_async(SessionStore)()
    other["demos"] = True
    await sync_to_async(other.save)()
    other_cookie = (b"cookie", f"sessionid={other.session_key}".encode())
    a, b = await connect(cookie), await connect(other_cookie)
    try:
        run_a = await start(a, {**SHORT, "max_new_tokens": 6})
        run_b = await start(b, {**SHORT, "max_new_tokens": 5, "prompt": "One, two, three,"})
        frames_a, frames_b = await asyncio.gather(collect(a), collect(b))
        # b may not resume (or cancel) a's run: it looks like it does not exist.
        await send(b, {"action": "resume", "run_id": run_a, "after_seq": -1})
        denied = await recv(b)
        await send(b, {"action": "cancel", "run_id": run_a})
        denied_cancel = await recv(b)
        assert await b.receive_nothing(timeout=0.5)
    finally:
        await a.disconnect()
        await b.disconnect()
    assert {f["run_id"] for f in frames_a} == {run_a}
    assert {f["run_id"] for f in frames_b} == {run_b}
    assert denied["code"] == "not_found" and denied_cancel["code"] == "not_found"


async def test_cancelling_a_run_that_already_ended_changes_nothing(demo_stack, session_cookie):
    """A Stop that crosses the last event on the wire: no error frame (the page would show a failed run), the
    stored run stays done, and the socket goes on working."""
    cookie, _ = session_cookie
    comm = await connect(cookie)
    try:
        run_id = await start(comm, {**SHORT, "max_new_tokens": 2})
        assert (await collect(comm))[-1]["type"] == "done"
        await send(comm, {"action": "cancel", "run_id": run_id})
        await send(comm, {"action": "ping"})
        reply = await recv(comm)
    finally:
        await comm.disconnect()
    assert reply["type"] == "pong", reply  # the first frame after the cancel: nothing was sent for it
    assert (await get_run(run_id)).status == "done"


async def test_cancel_stops_the_worker_between_steps(demo_stack, session_cookie):
    cookie, _ = session_cookie
    comm = await connect(cookie)
    try:
        run_id = await start(comm, LONG)
        await collect(comm, stop=lambda f: f["type"] == "event" and f["event"]["type"] == "token")
        await send(comm, {"action": "cancel", "run_id": run_id})
        frames = await collect(comm, timeout=30)
    finally:
        await comm.disconnect()
    done = frames[-1]
    assert done["type"] == "done" and done["status"] == "cancelled", done
    assert done["summary"]["finish_reason"] == "cancelled"
    run = await get_run(run_id)
    assert run.status == "cancelled" and run.summary["cancel_reason"] == "user"
    assert run.summary["n_generated"] < LONG["max_new_tokens"]
    assert await stored_seqs(run_id) == list(range(run.n_events))
    # The engine's generator was closed and the worker is free: a new run works.
    comm = await connect(cookie)
    try:
        await start(comm, {**SHORT, "max_new_tokens": 3, "prompt": "Hello"})
        assert (await collect(comm))[-1]["type"] == "done"
    finally:
        await comm.disconnect()


def worker_stats(stack) -> list[dict]:
    import json

    import redis

    r = redis.Redis.from_url(stack.redis_url)
    return [json.loads(raw) for key in r.scan_iter(match="demos:worker:*") if (raw := r.get(key))]


async def test_cancelling_a_batched_run_stops_it_within_a_second_and_frees_its_kv_blocks(demo_stack, session_cookie):
    """A cached run goes through the worker's continuous-batching engine: Stop ends it (the worker's own
    `done`) within a second, its request leaves the batch and its KV blocks return to the pool."""
    cookie, _ = session_cookie
    comm = await connect(cookie)
    try:
        run_id = await start(comm, {**LONG, "use_cache": True, "max_new_tokens": 128,
                                    "prompt": f"Cancel me ({time.time()}): once upon a time,"})
        await collect(comm, stop=lambda f: f["type"] == "event" and f["event"]["type"] == "token"
                      and f["event"]["step"] >= 2)

        async def in_batch():
            return any(w["batch_size"] >= 1 and w["kv_blocks_used"] > 0 for w in worker_stats(demo_stack))
        await wait_for(in_batch, timeout=5)
        t0 = time.monotonic()
        await send(comm, {"action": "cancel", "run_id": run_id})
        frames = await collect(comm, timeout=30)
        stopped_in = time.monotonic() - t0
    finally:
        await comm.disconnect()
    assert frames[-1]["type"] == "done" and frames[-1]["status"] == "cancelled", frames[-1]
    assert stopped_in < 1.0, stopped_in
    run = await get_run(run_id)
    assert run.status == "cancelled" and run.summary["n_generated"] < 128
    # The worker republishes its stats every DEMO_STATS_INTERVAL (1 s): the batch is empty, blocks freed
    # (the prefix cache may keep the prompt's full blocks only as evictable, refcount-0 blocks).
    async def drained():
        stats = worker_stats(demo_stack)
        return stats and all(w["batch_size"] == 0 and w["waiting"] == 0 and w["kv_blocks_used"] == 0
                             for w in stats)
    await wait_for(drained, timeout=5)


async def test_closed_tab_cancels_after_the_grace_period(demo_stack, session_cookie):
    cookie, _ = session_cookie
    comm = await connect(cookie)
    run_id = await start(comm, LONG)
    await collect(comm, stop=lambda f: f["type"] == "event" and f["event"]["type"] == "token")
    await comm.disconnect()  # the tab went away and never came back
    t0 = time.monotonic()

    async def cancelled():
        run = await get_run(run_id)
        return run if run.status == "cancelled" else None

    run = await wait_for(cancelled, timeout=60)
    assert run.summary["cancel_reason"] == "client_gone"
    assert time.monotonic() - t0 >= 1.5  # not before the grace period (2 s for tests)


async def test_a_run_still_watched_elsewhere_is_not_cancelled_when_one_socket_closes(demo_stack, session_cookie):
    cookie, _ = session_cookie
    a = await connect(cookie)
    run_id = await start(a, {**LONG, "max_new_tokens": 40})
    first = await collect(a, stop=lambda f: f["type"] == "event" and f["event"]["type"] == "token")
    b = await connect(cookie)  # e.g. a second tab, or the reconnect racing the old socket's close
    try:
        await send(b, {"action": "resume", "run_id": run_id, "after_seq": events_of(first)[-1]["seq"]})
        assert (await recv(b))["type"] == "resumed"
        await a.disconnect()
        frames = await collect(b, timeout=120)
    finally:
        await b.disconnect()
    assert frames[-1]["type"] == "done" and frames[-1]["status"] == "done", frames[-1]
    assert_contiguous(events_of(first) + events_of(frames))


async def test_worker_killed_mid_run_gives_an_error_frame_not_a_hang(demo_stack, session_cookie, fast_watchdog):
    cookie, _ = session_cookie
    comm = await connect(cookie)
    try:
        run_id = await start(comm, LONG)
        await collect(comm, stop=lambda f: f["type"] == "event" and f["event"]["type"] == "token")
        demo_stack.kill("worker")  # SIGKILL: no cleanup, no final message
        t0 = time.monotonic()
        frames = await collect(comm, timeout=30)
        waited = time.monotonic() - t0
    finally:
        await comm.disconnect()
        demo_stack.start_worker()  # later tests need one
    err = frames[-1]
    assert err["type"] == "error" and err["code"] == "worker_lost" and err["run_id"] == run_id, err
    assert waited < 15
    assert_contiguous(events_of(frames), start=events_of(frames)[0]["seq"] if events_of(frames) else 0)
    assert (await get_run(run_id)).status == "error"


async def test_concurrency_and_rate_limits_answer_with_retry_after(demo_stack, session_cookie, settings):
    cookie, owner = session_cookie
    settings.DEMO_MAX_CONCURRENT_RUNS = 1
    settings.DEMO_RUNS_PER_MINUTE = 3
    comm = await connect(cookie)
    try:
        run_id = await start(comm, LONG)
        await send(comm, {"action": "start", "demo": "kv-cache", "params": SHORT})
        busy = await collect(comm, until=("error",))
        assert busy[-1]["code"] == "too_many_runs" and busy[-1]["retry_after"] >= 1
        assert "run_id" not in busy[-1]
        await send(comm, {"action": "cancel", "run_id": run_id})
        assert (await collect(comm))[-1]["status"] == "cancelled"

        # Two more runs inside the minute: the third start is over the per-minute limit.
        for _ in range(2):
            await sync_to_async(Run.objects.create)(demo="kv-cache", owner=owner, status="done",
                                                    params={}, summary={})
        await send(comm, {"action": "start", "demo": "kv-cache", "params": SHORT})
        limited = await recv(comm)
        assert limited["type"] == "error" and limited["code"] == "rate_limited", limited
        assert 1 <= limited["retry_after"] <= 60
        # A minute later the window has room again.
        await sync_to_async(Run.objects.filter(owner=owner).update)(created_at=timezone.now() - timedelta(seconds=61))
        await start(comm, {**SHORT, "max_new_tokens": 2})
        assert (await collect(comm))[-1]["type"] == "done"
    finally:
        await comm.disconnect()


async def test_a_replay_asked_for_is_served_from_storage_paced_like_the_original(demo_stack):
    params = {**SHORT, "max_new_tokens": 8, "prompt": "Water boils at"}
    comm = await connect()
    try:
        t0 = time.monotonic()
        first_id = await start(comm, params)
        first = await collect(comm)
        first_s = time.monotonic() - t0
        await sync_to_async(Run.objects.filter(pk=first_id).update)(worker="original-worker")

        await send(comm, {"action": "start", "demo": "kv-cache", "params": params, "replay": True})
        accepted = await recv(comm)
        t1 = time.monotonic()
        second = await collect(comm)
        second_s = time.monotonic() - t1
        # A run not asked to be a replay is live (a worker slot is free).
        await send(comm, {"action": "start", "demo": "kv-cache", "params": {**params, "temperature": 0.8}})
        sampled = await recv(comm)
        await collect(comm)
    finally:
        await comm.disconnect()
    assert accepted["replayed_from"] == first_id
    assert second[-1]["type"] == "done" and second[-1]["replayed_from"] == first_id
    assert second[-1]["summary"]["replayed"] is True
    assert [f["type"] for f in second[:1]] == ["header"] and second[0]["mode"] == "replay"
    assert [e["event"] for e in events_of(second)] == [e["event"] for e in events_of(first)]
    stored = await sync_to_async(lambda: list(RunEvent.objects.filter(run_id=first_id).values_list("t", flat=True)))()
    assert second_s >= 0.8 * (max(stored) - min(stored))  # paced like the original
    assert second_s < first_s + 5
    replay = await get_run(accepted["run_id"])
    assert replay.replay_of_id is not None and replay.worker == "replay" and replay.status == "done"
    assert "replayed_from" not in sampled


async def test_dashboard_streams_worker_stats_and_queue_length(demo_stack):
    comm = await connect(path="/ws/demos/dashboard/")
    try:
        stats = await recv(comm, timeout=10)
    finally:
        await comm.disconnect()
    assert stats["type"] == "stats"
    assert stats["queue"]["gpu"] >= 0
    assert any(w["engine_loaded"] and w["model"] for w in stats["workers"]), stats
    assert {"batch_size", "tokens_per_s", "runs_total"} <= set(stats["workers"][0])


async def test_a_run_sent_before_the_worker_is_warm_is_told_about_the_warm_up_and_then_completes(
        demo_stack, session_cookie):
    """Issue 24: right after start-up the queued frames said "number 2 in line, about 20 s" while the worker was
    still building kernels and loading the model. They now carry what the worker is doing (`warming`), and the
    run completes once it is warm."""
    import redis

    cookie, _ = session_cookie
    demo_stack.kill("worker")
    redis.Redis.from_url(demo_stack.redis_url).delete(*[  # as the stats of a dead worker expire
        k for k in redis.Redis.from_url(demo_stack.redis_url).scan_iter(match="demos:worker:*")])
    await asyncio.sleep(1.1)  # the consumer's view of the workers (one scan a second) sees none
    comm = await connect(cookie)
    starting = None
    try:
        run_id = await start(comm, {**SHORT, "max_new_tokens": 4}, live=True)  # live: never a replay while busy
        starting = asyncio.get_running_loop().run_in_executor(None, demo_stack.start_worker)
        frames = await collect(comm, timeout=200)
    finally:
        await comm.disconnect()
        if starting is not None:
            await starting
        else:
            demo_stack.start_worker()  # later tests need one
    queued = [f for f in frames if f["type"] == "queued"]
    assert queued and all(f["run_id"] == run_id for f in queued), frames[:3]
    phases = [f["warming"]["phase"] for f in queued if "warming" in f]
    assert phases and phases[0] == "starting", queued  # no worker has reported yet
    assert set(phases) <= {"starting", "kernels", "loading", "first_decode"}, phases
    assert all(f["warming"]["warming_s"] is None or f["warming"]["warming_s"] >= 0 for f in queued if "warming" in f)
    assert frames[-1]["type"] == "done" and frames[-1]["status"] == "done", frames[-1]
    assert all(f["type"] != "queued" for f in frames[frames.index(events_of(frames)[0]):])
