"""The model-parallelism demo on the real worker stack (Redis, a Celery worker, the demo websocket): a run spawns its
2 ranks from the worker and finishes token-identical to one process; Stop over the websocket ends it, and either way
no rank process is left under the worker."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from demo_helpers import collect, connect, events_of, send, start

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

DEMO = "tensor-parallel"


def ranks_under(pid: int) -> list[int]:
    """Processes whose parent is `pid` and that multiprocessing's spawn started (the ranks; not its resource
    tracker, which the worker keeps for its lifetime)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and b"spawn_main" in cmdline:
            found.append(int(stat.parent.name))
    return found


def no_ranks_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while ranks_under(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


async def test_a_run_from_the_worker_is_one_process_s_tokens_and_leaves_no_rank(demo_stack, session_cookie):
    cookie, _ = session_cookie
    comm = await connect(cookie)
    try:
        await start(comm, {"prompt": "The capital of France is", "max_new_tokens": 4}, demo=DEMO)
        frames = await collect(comm, timeout=180)
    finally:
        await comm.disconnect()
    assert frames[-1]["type"] == "done" and frames[-1]["status"] == "done", frames[-1]
    events = [f["event"] for f in events_of(frames)]
    assert events[-1]["type"] == "parallel_summary" and events[-1]["identical"] is True
    assert no_ranks_within(demo_stack.procs["worker"].pid, 5)


async def test_stop_over_the_websocket_ends_both_ranks(demo_stack, session_cookie):
    cookie, _ = session_cookie
    worker = demo_stack.procs["worker"].pid
    comm = await connect(cookie)
    try:
        run_id = await start(comm, {"max_new_tokens": 32}, demo=DEMO)
        await collect(comm, timeout=180, stop=lambda f: f["type"] == "event" and f["event"]["type"] == "parallel_step")
        assert len(ranks_under(worker)) == 2  # both ranks run under the worker
        await send(comm, {"action": "cancel", "run_id": run_id})
        frames = await collect(comm, timeout=60)
    finally:
        await comm.disconnect()
    assert frames[-1]["type"] == "done" and frames[-1]["status"] == "cancelled", frames[-1]
    assert sum(e["event"]["type"] == "parallel_step" for e in events_of(frames)) < 31
    assert no_ranks_within(worker, 5)
