"""Scale-out and Redis restarts: two Celery workers and two Daphne processes on one Redis and one DB.

Real processes only (no in-process consumer): the test talks to Daphne over real websockets with a
tiny RFC 6455 client, so delivery crosses processes exactly as in production.
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import struct
import time
import uuid

import pytest
from asgiref.sync import sync_to_async

from demo_helpers import (FINAL, assert_contiguous, assert_ends_with_the_run_then_its_comparison, collect, events_of,
                          get_run, stored_seqs, wait_for)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

# The same session starts several runs at once; the default per-session limits (2 active, 12/min)
# would refuse them. Only the two Daphne processes of this module get these.
# A stated capacity of 8 slots: more runs than that queue (queue positions; runs queued while no worker is up)
# rather than being replayed, whatever the workers report.
DAPHNE_ENV = {"DEMO_MAX_CONCURRENT_RUNS": "16", "DEMO_RUNS_PER_MINUTE": "100", "DEMO_WORKER_SLOTS": "8"}


class WS:
    """A minimal websocket client (text frames, client masking, ping/pong, close) over asyncio streams."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, port: int, cookie: bytes | None = None, path: str = "/ws/demos/",
                      source: str | None = None, headers: dict | None = None) -> "WS":
        """`source`: the local address to connect from (any of 127.0.0.0/8 is this machine: a visitor of its
        own); `headers`: more request headers (e.g. a forged X-Forwarded-For)."""
        local = (source, 0) if source else None
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, local_addr=local), 10)
        key = base64.b64encode(os.urandom(16)).decode()
        head = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                f"Origin: http://127.0.0.1:{port}\r\n")
        if cookie:
            head += f"Cookie: {cookie.decode()}\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        writer.write((head + "\r\n").encode())
        await writer.drain()
        response = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert response.startswith(b"HTTP/1.1 101"), response
        return cls(reader, writer)

    async def send(self, obj) -> None:
        await self._frame(0x1, json.dumps(obj).encode())

    async def _frame(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        mask = os.urandom(4)
        self.writer.write(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        await self.writer.drain()

    async def recv(self, timeout: float = 30.0) -> dict:
        return await asyncio.wait_for(self._recv(), timeout)

    async def _recv(self) -> dict:
        message = b""
        while True:
            b0, b1 = await self.reader.readexactly(2)
            n = b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", await self.reader.readexactly(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", await self.reader.readexactly(8))
            payload = await self.reader.readexactly(n)  # server frames are not masked
            opcode = b0 & 0x0F
            if opcode == 0x9:
                await self._frame(0xA, payload)
            elif opcode == 0x8:
                raise ConnectionError(f"server closed the websocket: {payload!r}")
            elif opcode in (0x0, 0x1):
                message += payload
                if b0 & 0x80:
                    return json.loads(message)

    async def collect(self, timeout: float = 90.0, stop=None) -> list[dict]:
        return await collect(self, timeout, stop=stop, receive=self.recv)

    async def close(self) -> None:
        try:
            await self._frame(0x8, struct.pack("!H", 1000))
        except (ConnectionError, OSError):
            pass
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass


@pytest.fixture(scope="module")
def scaleout(demo_stack):
    """The session stack's Redis and worker, plus a second worker and two Daphne processes."""
    demo_stack.start_worker("worker-b")
    demo_stack.start_daphne("daphne-a", DAPHNE_ENV)
    demo_stack.start_daphne("daphne-b", DAPHNE_ENV)
    try:
        yield demo_stack
    finally:
        for name in ("daphne-b", "daphne-a", "worker-b"):
            demo_stack.kill(name, signal.SIGTERM)


def worker_pids(stack) -> dict[int, str]:
    return {stack.procs[name].pid: name for name in ("worker", "worker-b")}


async def resume_to_the_end(port: int, cookie: bytes, run_id: str, first: list[dict]) -> list[dict]:
    """Resume `run_id` on the Daphne at `port` after the last event in `first`; assert the rest arrives
    exactly once and the run completes, in storage too. Returns every event."""
    ws = await WS.connect(port, cookie)
    try:
        last = first[-1]["seq"]
        await ws.send({"action": "resume", "run_id": run_id, "after_seq": last})
        resumed = await ws.recv()
        assert resumed["type"] == "resumed" and resumed["after_seq"] == last, resumed
        rest = await ws.collect(timeout=120)
    finally:
        await ws.close()
    assert rest[-1]["type"] == "done" and rest[-1]["status"] == "done", rest[-1]
    events = first + events_of(rest)
    assert_contiguous(events)
    assert_ends_with_the_run_then_its_comparison(events)
    assert [e["seq"] for e in events] == await stored_seqs(run_id)
    return events


async def start_run(ws: WS, params: dict) -> str:
    """Start one kv-cache run on `ws` and return its id (the reply must be `accepted`)."""
    await ws.send({"action": "start", "demo": "kv-cache", "params": params})
    accepted = await ws.recv()
    assert accepted["type"] == "accepted", accepted
    return accepted["run_id"]


async def start_runs(ws: WS, prompts: list[str], **params) -> dict[str, list[dict]]:
    """Start one run per prompt (all before reading any), then read every frame until all are final."""
    for i, prompt in enumerate(prompts):
        await ws.send({"action": "start", "demo": "kv-cache", "ref": f"r{i}",
                       "params": {"prompt": prompt, "temperature": 0.0, **params}})
    frames: dict[str, list[dict]] = {}
    accepted = 0
    deadline = time.monotonic() + 90
    while accepted < len(prompts) or any(not fs or fs[-1]["type"] not in FINAL for fs in frames.values()):
        frame = await ws.recv(max(0.1, deadline - time.monotonic()))
        if frame["type"] == "accepted":
            assert "replayed_from" not in frame, frame  # distinct prompts: all really run
            accepted += 1
            frames[frame["run_id"]] = []
        else:
            assert frame.get("run_id") in frames, frame
            frames[frame["run_id"]].append(frame)
    return frames


async def test_two_workers_two_daphnes_share_runs_and_resume_across_processes(scaleout, session_cookie):
    """Runs from one socket on Daphne A are spread over both workers; Daphne B resumes them.

    Distribution is not deterministic (each worker takes at most 2 runs at once: `-c 2`, prefetch
    multiplier 1, acks_late), so up to 3 batches of 4 concurrent runs are started until both workers
    have run one; in practice the first batch already uses both.
    """
    (_, cookie), _owner = session_cookie
    pids = worker_pids(scaleout)
    a = await WS.connect(scaleout.http_ports["daphne-a"], cookie)
    used: dict[str, str] = {}
    try:
        for batch in range(3):
            nonce = uuid.uuid4().hex[:8]
            prompts = [f"Run {i} of batch {batch} ({nonce}): the sky is" for i in range(4)]
            runs = await start_runs(a, prompts, max_new_tokens=6, use_cache=True)
            assert len(runs) == 4
            for run_id, frames in runs.items():
                assert frames[-1]["type"] == "done" and frames[-1]["status"] == "done", frames[-1]
                events = events_of(frames)
                assert_contiguous(events)
                assert_ends_with_the_run_then_its_comparison(events)
                assert [e["seq"] for e in events] == await stored_seqs(run_id)
                run = await get_run(run_id)
                pid = int(run.worker.rsplit(":", 1)[1])
                assert pid in pids, (run.worker, pids)
                assert frames[-1]["summary"]["worker"] == run.worker
                used[run_id] = pids[pid]
            if len(set(used.values())) == 2:
                break
    finally:
        await a.close()
    assert set(used.values()) == {"worker", "worker-b"}, used

    # Resume through the other Daphne process: same session cookie, so the same owner.
    a = await WS.connect(scaleout.http_ports["daphne-a"], cookie)
    try:
        await a.send({"action": "start", "demo": "kv-cache",
                      "params": {"prompt": f"Resume me {uuid.uuid4().hex[:8]}: one, two,", "max_new_tokens": 16,
                                 "use_cache": True, "temperature": 0.0}})
        accepted = await a.recv()
        assert accepted["type"] == "accepted", accepted
        run_id = accepted["run_id"]
        first = events_of(await a.collect(stop=lambda f: f["type"] == "event" and f["seq"] >= 3))
        b = await WS.connect(scaleout.http_ports["daphne-b"], cookie)
    finally:
        await a.close()
    try:
        last = first[-1]["seq"]
        await b.send({"action": "resume", "run_id": run_id, "after_seq": last})
        resumed = await b.recv()
        assert resumed["type"] == "resumed" and resumed["after_seq"] == last, resumed
        rest = await b.collect()
    finally:
        await b.close()
    assert rest[-1]["type"] == "done" and rest[-1]["status"] == "done", rest[-1]
    events = first + events_of(rest)
    assert_contiguous(events)
    assert [e["seq"] for e in events] == await stored_seqs(run_id)


async def test_a_run_survives_a_redis_restart_and_resumes_without_gaps(scaleout, session_cookie):
    """Redis is stopped (SIGTERM) mid-run and started again on the same port.

    The worker keeps stepping (events are persisted in the database, publishes during the outage are
    lost); the client reconnects and resumes after the last seq it saw and gets the rest exactly once.
    """
    (_, cookie), _owner = session_cookie
    params = {"prompt": f"Once upon a time ({uuid.uuid4().hex[:8]}), in a village by the sea,",
              "max_new_tokens": 48, "use_cache": False, "temperature": 0.0}
    ws = await WS.connect(scaleout.http_ports["daphne-a"], cookie)
    try:
        run_id = await start_run(ws, params)
        first = events_of(await ws.collect(stop=lambda f: f["type"] == "event" and f["event"]["type"] == "token"
                                           and f["seq"] >= 3))
        scaleout.kill("redis", signal.SIGTERM)
        await asyncio.sleep(1.0)  # the worker takes steps while Redis is down
        await sync_to_async(scaleout.start_redis)()
    finally:
        await ws.close()
    run = await get_run(run_id)
    assert run.status == "running", (run.status, run.error_code, run.error_message)

    events = await resume_to_the_end(scaleout.http_ports["daphne-b"], cookie, run_id, first)
    run = await get_run(run_id)
    assert run.status == "done" and run.n_events == len(events)


async def test_waiting_runs_are_told_their_queue_position(scaleout, session_cookie):
    """Six slow runs on four worker slots: the runs that wait get `queued` frames (position, estimate)
    before their first event, positions only go down, and every run still completes."""
    (_, cookie), _owner = session_cookie
    ws = await WS.connect(scaleout.http_ports["daphne-a"], cookie)
    nonce = uuid.uuid4().hex[:8]
    try:
        prompts = [f"Story {i} ({nonce}): once upon a time, in a village by the sea," for i in range(6)]
        runs = await start_runs(ws, prompts, max_new_tokens=20, use_cache=False)
    finally:
        await ws.close()
    reports = {}
    for run_id, frames in runs.items():
        assert frames[-1]["type"] == "done" and frames[-1]["status"] == "done", frames[-1]
        kinds = [f["type"] for f in frames]
        queued = [f for f in frames if f["type"] == "queued"]
        if queued:
            assert kinds.index("event") > max(i for i, k in enumerate(kinds) if k == "queued"), kinds
            positions = [f["position"] for f in queued]
            assert positions == sorted(positions, reverse=True) and positions[-1] >= 1, positions
            assert all(f["ahead"] == f["position"] - 1 and f["eta_s"] >= 0 for f in queued), queued
            reports[run_id] = positions
        assert_contiguous(events_of(frames))
    # Four slots, six runs started together: at least the sixth waited behind the fifth.
    assert any(p[0] >= 2 for p in reports.values()), reports


async def test_a_run_survives_a_daphne_restart_and_resumes_on_the_new_process(scaleout, session_cookie):
    """Daphne A is SIGKILLed mid-run (its sockets die without a close) and started again; the client
    reconnects to the new process and resumes: every event exactly once, the run completes."""
    (_, cookie), _owner = session_cookie
    params = {"prompt": f"Daphne restart ({uuid.uuid4().hex[:8]}): the old lighthouse keeper",
              "max_new_tokens": 40, "use_cache": False, "temperature": 0.0}
    ws = await WS.connect(scaleout.http_ports["daphne-a"], cookie)
    run_id = await start_run(ws, params)
    first = events_of(await ws.collect(stop=lambda f: f["type"] == "event" and f["seq"] >= 3))
    scaleout.kill("daphne-a")
    await ws.close()
    await sync_to_async(scaleout.start_daphne)("daphne-a", DAPHNE_ENV)
    await resume_to_the_end(scaleout.http_ports["daphne-a"], cookie, run_id, first)


async def _final(run_id: str):
    """The run once it has ended (for `wait_for`), else None."""
    run = await get_run(run_id)
    return run if run.status in ("done", "cancelled", "error") else None


async def test_a_killed_workers_run_is_failed_by_the_server_with_nobody_watching(scaleout, session_cookie):
    """kill -9 the worker mid-run after the page closed: the reaper thread of the web servers
    (demos/reaper.py, started by `python -m inferencelab.server`) marks the run failed and its slot free."""
    (_, cookie), _owner = session_cookie
    params = {"prompt": f"Reaper ({uuid.uuid4().hex[:8]}): the lighthouse keeper told a long story",
              "max_new_tokens": 64, "use_cache": False, "temperature": 0.0}
    ws = await WS.connect(scaleout.http_ports["daphne-a"], cookie)
    try:
        run_id = await start_run(ws, params)
        await ws.collect(stop=lambda f: f["type"] == "event" and f["event"]["type"] == "token")
    finally:
        await ws.close()
    run = await get_run(run_id)
    name = worker_pids(scaleout)[int(run.worker.rsplit(":", 1)[1])]
    scaleout.kill(name)  # SIGKILL: no goodbye, its heartbeat simply stops
    killed_at = time.monotonic()
    try:
        run = await wait_for(lambda: _final(run_id), timeout=30, interval=0.5)
        assert run.status == "error" and run.error_code == "worker_lost", (run.status, run.error_code)
        assert time.monotonic() - killed_at < 30
    finally:
        await sync_to_async(scaleout.start_worker)(name)


async def test_queued_runs_run_after_a_redis_restart(scaleout, session_cookie):
    """With no worker up, runs wait in Redis (Celery tickets and the fair lists); Redis restarts (its
    append-only file, as under `make run`); then workers come back and every queued run completes."""
    (_, cookie), _owner = session_cookie
    for name in ("worker", "worker-b"):
        scaleout.kill(name)
    try:
        ws = await WS.connect(scaleout.http_ports["daphne-a"], cookie)
        ids = []
        try:
            for i in range(2):
                await ws.send({"action": "start", "demo": "kv-cache", "ref": f"q{i}", "params": {
                    "prompt": f"Queued through a Redis restart ({uuid.uuid4().hex[:8]})", "max_new_tokens": 2}})
                # `accepted` comes before the run is in Redis and `queued` (its position) after, so Redis
                # stops only once both runs are really in the queue.
                frame = await ws.recv()
                while frame["type"] != "queued":
                    assert frame["type"] != "error", frame
                    frame = await ws.recv()
                ids.append(frame["run_id"])
        finally:
            await ws.close()
        scaleout.kill("redis", signal.SIGTERM)
        await sync_to_async(scaleout.start_redis)()
        runs = [await get_run(run_id) for run_id in ids]
        assert [r.status for r in runs] == ["queued", "queued"], [(r.status, r.error_code) for r in runs]
    finally:
        await sync_to_async(scaleout.start_worker)("worker")
        await sync_to_async(scaleout.start_worker)("worker-b")
    runs = [await wait_for(lambda run_id=run_id: _final(run_id), timeout=90, interval=0.5) for run_id in ids]
    # Nobody watches them after the socket closed: the worker may cancel them as orphans, but it must have
    # picked them up from the restarted Redis, not lost them (which would leave them queued).
    assert all(run.status in ("done", "cancelled") for run in runs), [(r.status, r.error_code) for r in runs]
    assert all(run.worker for run in runs)
