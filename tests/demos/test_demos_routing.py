"""Issue 13: demo runs land on the workers their route names (one queue per accelerator type).

Real processes: the session stack's worker serves the default `gpu` queue; a second worker serves only
`gpu-h100`, and a Daphne started with DEMO_TASK_QUEUE=gpu-h100 routes its students' runs there. Each queue has
its own fair lists, so a ticket never takes a run routed elsewhere.
"""
from __future__ import annotations

import signal
import uuid

import pytest
from test_demos_scaleout import DAPHNE_ENV, WS, start_run

from demo_helpers import FINAL, connect, get_run, recv, send, start, visitor_cookie, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

H100 = "gpu-h100"


@pytest.fixture(scope="module")
def routed(demo_stack):
    demo_stack.start_worker("worker-h100", queues=H100)
    demo_stack.start_daphne("daphne-h100", {**DAPHNE_ENV, "DEMO_TASK_QUEUE": H100})
    try:
        yield demo_stack
    finally:
        for name in ("daphne-h100", "worker-h100"):
            demo_stack.kill(name, signal.SIGTERM)


def pid_of(run) -> int:
    return int(run.worker.rsplit(":", 1)[1])


async def finish(ws: WS) -> dict:
    while True:
        frame = await ws.recv(120)
        if frame["type"] in FINAL:
            return frame


async def test_runs_land_on_the_worker_their_route_names(routed, session_cookie):
    header, _owner = session_cookie
    cookie = header[1]
    h100_pid, default_pid = routed.procs["worker-h100"].pid, routed.procs["worker"].pid
    ws = await WS.connect(routed.http_ports["daphne-h100"], cookie)
    try:
        routed_runs = []
        for i in range(3):  # several, so a worker that took any ticket would show up
            run_id = await start_run(ws, {"prompt": f"Routed {i} ({uuid.uuid4().hex[:6]}): one, two,",
                                          "max_new_tokens": 3, "use_cache": True})
            assert (await finish(ws))["status"] == "done"
            routed_runs.append(run_id)
    finally:
        await ws.close()
    for run_id in routed_runs:
        assert pid_of(await get_run(run_id)) == h100_pid
    comm = await connect(header)  # this process's own consumer: the default route, `gpu`
    try:
        run_id = await start(comm, {"prompt": f"Default route ({uuid.uuid4().hex[:6]}):", "max_new_tokens": 2})
        while (frame := await recv(comm, timeout=120))["type"] not in FINAL:
            pass
        assert frame["status"] == "done", frame
    finally:
        await comm.disconnect()
    assert pid_of(await get_run(run_id)) == default_pid


async def test_the_dashboard_counts_the_routed_queue(routed):
    ws = await WS.connect(routed.http_ports["daphne-h100"], path="/ws/demos/dashboard/")
    try:
        stats = await ws.recv(10)
    finally:
        await ws.close()
    assert set(stats["queue"]) == {H100, "cpu"} and stats["demo_queue"] == H100, stats


async def test_a_free_worker_never_takes_a_run_routed_to_another_queue(routed):
    """With the default worker busy, a run queued for it waits; a ticket on gpu-h100 takes its own run, not the
    older one waiting for `gpu` (with one fair list for all queues it would take the older one)."""
    from asgiref.sync import sync_to_async

    h100_pid, default_pid = routed.procs["worker-h100"].pid, routed.procs["worker"].pid
    long_run = {"prompt": "Write a long letter to a friend about the sea", "max_new_tokens": 128, "use_cache": False}
    # Both of the default worker's slots (-c 2), each held by its own visitor; then a third visitor's run waits.
    busy = [await connect(await sync_to_async(visitor_cookie)()) for _ in range(2)]
    waiting = await connect(await sync_to_async(visitor_cookie)())
    ws = await WS.connect(routed.http_ports["daphne-h100"], (await sync_to_async(visitor_cookie)())[1])
    try:
        busy_ids = [await start(c, {**long_run, "prompt": f"{long_run['prompt']} {i} {uuid.uuid4().hex[:6]}"})
                    for i, c in enumerate(busy)]

        async def both_running():
            return all([(await get_run(r)).status == "running" for r in busy_ids])
        await wait_for(both_running, timeout=30)
        queued_id = await start(waiting, {"prompt": f"Waits for gpu ({uuid.uuid4().hex[:6]}):", "max_new_tokens": 2})
        assert (await get_run(queued_id)).status == "queued"
        routed_id = await start_run(ws, {"prompt": f"Routed ({uuid.uuid4().hex[:6]}):", "max_new_tokens": 2})
        assert (await finish(ws))["status"] == "done"
        assert pid_of(await get_run(routed_id)) == h100_pid
        for comm, run_id in zip(busy, busy_ids):
            await send(comm, {"action": "cancel", "run_id": run_id})
        while (frame := await recv(waiting, timeout=120))["type"] not in FINAL:
            pass
        assert frame["status"] == "done", frame
        assert pid_of(await get_run(queued_id)) == default_pid
    finally:
        await ws.close()
        for comm in busy + [waiting]:
            await comm.disconnect()
