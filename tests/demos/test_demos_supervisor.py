"""Issue 23: the course stays up when a process dies, and no run is failed, lost or computed for nobody.

Real processes only. The first test drives `make run`'s supervisor (scripts/run_stack.py: its Redis, two
Celery workers, Daphne on free ports, a throw-away database; tests/demos/make_run.py) through a 15 s Redis pause,
a SIGKILL of the `gpu` worker mid-run and a SIGKILL of Redis with a run in flight (issues 38, 43: the worker
reconnects by itself and a new run is done within 20 s), gives up on each worker in turn (a queued run then says
the demo worker is down), and stops within 10 s, with a page fetched every quarter second throughout and a
student's websocket open, and prints the figures the issues ask for. The others use the session's test stack and
stop its worker with SIGSTOP: a queued run whose owner left is dropped instead of computed, and a worker that
wakes after its run was failed stops computing it.
"""
from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
import time
import uuid

import psutil
import pytest
import redis
from asgiref.sync import sync_to_async
from make_run import LONG, ROOT, MakeRun, PagePoller, first_token, given_up_on, pings, run_status, start_on
from test_demos_scaleout import WS

from demo_helpers import collect, connect, get_run, start, stored_seqs, wait_for
from demo_stack import free_port


@pytest.mark.integration
@pytest.mark.timeout(420)
async def test_make_run_keeps_the_course_up_through_a_redis_pause_a_dead_worker_and_a_dead_redis(tmp_path):
    db = tmp_path / "db.sqlite3"
    env = dict(os.environ)
    env.pop("REDIS_URL", None)
    env.update({"PORT": str(free_port()), "REDIS_PORT": str(free_port()), "HOST": "127.0.0.1",
                "DATABASE_URL": f"sqlite:///{db}", "CELERY_CONCURRENCY": "2", "CELERY_CPU_CONCURRENCY": "1",
                "SUPERVISOR_RESTART_LIMIT": "2", "MACHINE_PROFILE_QUICK": "1",
                "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1")})
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    stack = MakeRun(env)
    figures: dict[str, float] = {}
    try:
        stack.wait_for_line("Inference Lab is up", 180)
        await sync_to_async(stack.wait_worker_ready)(180)
        base = f"http://127.0.0.1:{stack.port}"
        # Redis asks for this install's password, which is on no command line.
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(port=int(env["REDIS_PORT"])).ping()
        password = (ROOT / "var" / "redis_password").read_text().strip()
        assert stat.S_IMODE((ROOT / "var" / "redis_password").stat().st_mode) == 0o600
        assert stat.S_IMODE((ROOT / "var" / "redis.conf").stat().st_mode) == 0o600
        assert not [p for p in psutil.process_iter(["cmdline"]) if password in " ".join(p.info["cmdline"] or [])]
        pages = PagePoller(f"{base}/")
        ws = await WS.connect(stack.port)
        try:
            # 1. Redis paused for 15 s in the middle of a healthy run: the run completes.
            run_id = await start_on(ws, f"Through a pause ({uuid.uuid4().hex[:6]}), the river", **LONG)
            await ws.collect(stop=first_token)
            redis_pid = stack.child("redis-server").pid
            os.kill(redis_pid, signal.SIGSTOP)
            try:
                assert run_status(db, run_id)[0] == "running"
                await asyncio.sleep(15)
            finally:
                os.kill(redis_pid, signal.SIGCONT)
            frames = await ws.collect(timeout=120)
            assert frames[-1]["type"] == "done" and frames[-1]["status"] == "done", frames[-1]

            # 2. The gpu worker SIGKILLed mid-run: a final error frame within seconds, a retry at once that
            # completes as soon as the restarted worker is up.
            run_id = await start_on(ws, f"Cut short ({uuid.uuid4().hex[:6]}), the lighthouse", **LONG)
            await ws.collect(stop=first_token)
            stack.child("-Q gpu").kill()
            killed = time.monotonic()
            frames = await ws.collect(timeout=30)
            figures["worker kill → final frame (s)"] = time.monotonic() - killed
            assert frames[-1]["type"] == "error" and frames[-1]["code"] == "worker_lost", frames[-1]
            assert run_status(db, run_id) == ("error", "worker_lost")
            retry = await start_on(ws, f"Retry ({uuid.uuid4().hex[:6]}): one, two,", max_new_tokens=4)
            frames = await ws.collect(timeout=90)
            figures["worker kill → retried run done (s)"] = time.monotonic() - killed
            assert frames[-1]["type"] == "done" and frames[-1]["status"] == "done", frames[-1]
            assert run_status(db, retry)[0] == "done"

            # 3. Redis SIGKILLed with a run in flight (issues 38, 43): back (with its append-only file) within
            # seconds; the gpu worker reconnects by itself (no exit, no restart: inferencelab/broker.py) and runs a
            # new short run at once, beside the one in flight, which completes too.
            gpu, mark = stack.child("-Q gpu").pid, len(stack.lines)
            flight = await start_on(ws, f"In flight ({uuid.uuid4().hex[:6]}), the harbour", **LONG)
            await ws.collect(stop=first_token)
            stack.child("redis-server").kill()
            killed = time.monotonic()
            stack.wait_for_line("restarted redis", 30, after=mark)
            await wait_for(sync_to_async(lambda: pings(stack)), timeout=30, interval=0.2)
            figures["redis kill → redis answers (s)"] = time.monotonic() - killed
            other = await WS.connect(stack.port)
            try:
                await start_on(other, f"After Redis ({uuid.uuid4().hex[:6]}): red, green,", max_new_tokens=4)
                frames = await other.collect(timeout=90)
            finally:
                await other.close()
            figures["redis kill → new run done (s)"] = time.monotonic() - killed
            assert frames[-1]["type"] == "done" and frames[-1]["status"] == "done", frames[-1]
            frames = await ws.collect(timeout=180)
            assert frames[-1]["type"] == "done" and run_status(db, flight)[0] == "done", frames[-1]
            # Its ticket acknowledged through its old channel: none is left to be delivered again in 10 minutes.
            await wait_for(sync_to_async(lambda: not any(flight.encode() in raw for raw in stack.redis().hvals(
                "unacked"))), timeout=10, interval=0.3)
            assert stack.child("-Q gpu").pid == gpu, "the gpu worker was restarted"
            assert not any("gpu exited" in line or "Unrecoverable" in line for line in stack.lines[mark:])
        finally:
            await ws.close()

        # 4. The dashboard shows the restarts (to anyone, without pids).
        dash = await WS.connect(stack.port, path="/ws/demos/dashboard/")
        try:  # one frame a second; the supervisor republishes its record soon after Redis is back
            stats = (await collect(dash, 15, until=(), receive=dash.recv, stop=lambda frame: any(
                p["name"] == "redis" and p["restarts"] for p in frame.get("processes", []))))[-1]
        finally:
            await dash.close()
        processes = {p["name"]: p for p in stats["processes"]}
        assert processes["gpu"]["restarts"] == 1 and processes["redis"]["restarts"] == 1, processes  # gpu: step 2
        assert processes["gpu"]["last_restart"] and processes["daphne"]["restarts"] == 0, processes
        assert all(p["state"] == "running" and "pid" not in p for p in processes.values()), processes

        # 5. Past the cap on restarts per minute (2 here), the supervisor gives up on that child; the site stays.
        await given_up_on(stack, "cpu")

        # 6. Given up on the demo worker: a run's page says the worker is down, not that it is warming up.
        await given_up_on(stack, "gpu")
        ws = await WS.connect(stack.port)
        try:
            await start_on(ws, f"Nobody to run it ({uuid.uuid4().hex[:6]})", max_new_tokens=4)
            queued = await ws.collect(timeout=30, stop=lambda frame: frame["type"] == "queued" and (
                frame.get("warming") or {}).get("phase") == "given_up")
        finally:
            await ws.close()
        assert queued[-1]["warming"]["restarts"] >= 2, queued[-1]
        pages.finish()
        assert stack.proc.poll() is None
        assert pages.count > 100 and not pages.failures, pages.failures
    except BaseException:
        print("".join(line for line in stack.lines if '"GET /"' not in line)[-30000:])  # what the stack said
        raise
    finally:
        stopping = time.monotonic()
        status = stack.stop()
        figures["stop (s)"] = time.monotonic() - stopping
        print("\n".join(f"{name}: {value:.1f}" for name, value in figures.items()))
    assert status == 0 and "all stopped" in stack.output(), stack.output()[-3000:]
    assert "did not stop" not in stack.output() and figures["stop (s)"] <= 10, stack.output()[-3000:]
    assert figures["redis kill → new run done (s)"] <= 20, figures
    assert figures["worker kill → final frame (s)"] <= 10, figures
    assert figures["worker kill → retried run done (s)"] <= 60, figures
    assert figures["redis kill → redis answers (s)"] <= 30, figures


# --- the session's test stack, its worker stopped with SIGSTOP ------------------------------------------------


@sync_to_async
def _final(run_id):
    from demos.models import Run

    run = Run.objects.get(pk=run_id)
    return run if run.is_final else None


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
async def test_queued_runs_whose_owner_is_gone_are_dropped_not_computed(demo_stack, session_cookie):
    """Two runs wait while the worker is stopped: one's tab was closed, the other's Daphne was SIGKILLed (no
    disconnect ever ran). Past the grace period (the stack's DEMO_ORPHAN_GRACE, 2 s) nobody can be watching, so
    the worker drops both when it picks them up: cancelled (`client_gone`), never started, no event computed."""
    cookie, _owner = session_cookie
    name = "daphne-orphan"
    await sync_to_async(demo_stack.start_daphne)(name)
    port = demo_stack.http_ports[name]
    worker = demo_stack.procs["worker"]
    os.killpg(worker.pid, signal.SIGSTOP)
    try:
        comm = await connect(cookie)
        closed = await start(comm, {"prompt": f"A closed tab ({uuid.uuid4().hex[:6]}) waits", "max_new_tokens": 8})
        await comm.disconnect()
        ws = await WS.connect(port, cookie[1])
        orphan = await start_on(ws, f"A dead server ({uuid.uuid4().hex[:6]}) waits", max_new_tokens=8)
        await ws.collect(stop=lambda frame: frame["type"] == "queued")  # its ticket is on the way to the worker
        demo_stack.kill(name)  # SIGKILL: its sockets never say goodbye
        await wait_for(sync_to_async(lambda: not _server_alive_by_name(demo_stack, name)), timeout=20, interval=0.5)
        await asyncio.sleep(3)  # past the grace period, counted from when the worker sees nobody watching
    finally:
        os.killpg(worker.pid, signal.SIGCONT)
    for run_id in (closed, orphan):
        run = await wait_for(lambda run_id=run_id: _final(run_id), timeout=60, interval=0.3)
        assert (run.status, run.summary.get("cancel_reason")) == ("cancelled", "client_gone"), run.summary
        assert run.started_at is None and await stored_seqs(run_id) == []


def _server_alive_by_name(stack, name: str) -> bool:
    """Whether the Daphne `name` still counts as alive: its last beat (demos.runstate.server_key) is recent."""
    from demos.runstate import SERVER_TTL

    pid, r = stack.procs[name].pid, redis.Redis.from_url(stack.redis_url)
    beats = [float(r.get(key) or 0) for key in r.scan_iter("demos:server:*") if f":{pid}:" in key.decode()]
    return any(time.time() - beat < SERVER_TTL for beat in beats)


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
async def test_a_worker_woken_after_its_run_was_failed_stops_computing_it(demo_stack, session_cookie, fast_watchdog):
    cookie, _owner = session_cookie
    worker = demo_stack.procs["worker"]
    comm = await connect(cookie)
    try:
        run_id = await start(comm, {"prompt": f"Frozen ({uuid.uuid4().hex[:6]}), the clockmaker", **LONG})
        await collect(comm, stop=first_token)
        os.killpg(worker.pid, signal.SIGSTOP)  # hung: no heartbeat, no step
        try:
            frames = await collect(comm, timeout=30)
            assert frames[-1]["type"] == "error" and frames[-1]["code"] == "worker_lost", frames[-1]
            failed_with = len(await stored_seqs(run_id))
        finally:
            os.killpg(worker.pid, signal.SIGCONT)
    finally:
        await comm.disconnect()
    await asyncio.sleep(3)
    settled = await stored_seqs(run_id)
    await asyncio.sleep(2)
    assert await stored_seqs(run_id) == settled  # stopped, not still computing
    assert len(settled) <= failed_with + 2 < 64, (failed_with, len(settled))
    run = await get_run(run_id)
    assert (run.status, run.error_code) == ("error", "worker_lost")  # the state its client was told stays
    assert "was ended elsewhere" in demo_stack.log("worker")


# --- the rules, on the session's real Redis ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_run_counts_as_unwatched_only_once_every_watchers_server_stopped_beating(demo_stack):
    from demos.runstate import (ORPHAN_LUA, SERVER_TTL, detach_key, server_key, sync_redis, unwatched_for,
                                watchers_key, web_beat_key)

    r = sync_redis()
    run_id = str(uuid.uuid4())
    keys = (watchers_key(run_id), detach_key(run_id), web_beat_key(), server_key(""))

    def look(now: float, web_beat: float) -> float | None:
        """unwatched_for at `now` with the web tier's last beat at `web_beat`, in one transaction: the beacon
        threads of this process's servers cannot beat in between."""
        since = r.pipeline(transaction=True).set(web_beat_key(), web_beat).eval(
            ORPHAN_LUA, 3, *keys, f"{now:.3f}", SERVER_TTL).execute()[1]
        return None if since is None else now - float(since)

    assert unwatched_for(run_id) is None  # never watched: not judged
    t = time.time() + 10_000  # later than any real beat
    r.set(server_key("dead-server"), t)  # its last beat
    r.sadd(watchers_key(run_id), "dead-server|specific.abc", "no-server-id-from-an-older-version")
    # Another server beats: the dead one's sockets went with its last beat.
    assert look(t + 20, web_beat=t + 19) == pytest.approx(20, abs=0.01)
    r.delete(detach_key(run_id))
    # No server beats (Redis just came back from a pause): the clock starts now.
    assert look(t + 20, web_beat=t) == pytest.approx(0, abs=0.01)
    assert look(t + 25, web_beat=t + 24) == pytest.approx(5, abs=0.01)  # and then runs from there
    r.set(server_key("live-server"), t + 24)
    r.sadd(watchers_key(run_id), "live-server|specific.def")
    assert look(t + 25, web_beat=t + 24) is None  # watched
    assert not r.exists(detach_key(run_id))  # and the stale grace clock is gone
    r.delete(watchers_key(run_id), server_key("live-server"), server_key("dead-server"))
    r.set(web_beat_key(), time.time())


def test_a_missing_heartbeat_fails_a_run_only_after_the_grace_on_a_healthy_redis():
    from demos.runstate import REDIS_HEALTH, judge_heartbeat

    now = time.monotonic()
    REDIS_HEALTH.trouble_at = now - 100
    lost, since = judge_heartbeat(False, now, None, grace=0.3)
    assert not lost and since is not None
    time.sleep(0.35)
    assert judge_heartbeat(False, time.monotonic(), since, grace=0.3)[0]  # missing throughout: lost
    assert judge_heartbeat(True, time.monotonic(), since, grace=0.3) == (False, None)  # back: forgiven
    # A slow answer (Redis paused while it was asked) restarts the clock: no verdict from it.
    lost, since2 = judge_heartbeat(False, time.monotonic() - 5, since, grace=0.3)
    assert not lost and since2 > since
    REDIS_HEALTH.trouble()  # any other Redis failure does the same
    time.sleep(0.05)
    lost, since3 = judge_heartbeat(False, time.monotonic(), since2, grace=0.3)
    assert not lost and since3 > since2
