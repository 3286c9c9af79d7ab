"""gguf-inspect through the real stack: over the demo websocket, on a real Celery worker with its loaded engine, a run
streams the file and its tensors, every event stored; settings outside the spec are refused at the socket."""
from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from demos.models import Run, RunEvent

from demo_helpers import collect, connect, events_of, recv, send, start

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


async def test_a_run_streams_the_file_then_each_tensor_checked_against_the_worker_s_engine(demo_stack):
    comm = await connect()
    try:
        run_id = await start(comm, {"layers": 1, "block": 4}, demo="gguf-inspect")
        frames = await collect(comm, timeout=180)
    finally:
        await comm.disconnect()
    assert frames[-1]["type"] == "done", frames[-1]
    events = [f["event"] for f in events_of(frames)]
    assert events[0]["type"] == "gguf_file" and events[0]["n_tensors"] == 272
    tensors = [e for e in events if e["type"] == "gguf_tensor"]
    assert len(tensors) == 11 and {e["block"] for e in tensors} == {4}
    # The worker's own engine holds what each block decodes to (fp32 on a CPU worker, bf16 on a GPU one).
    assert all(e["max_abs_diff"] <= (0 if e["engine_dtype"] == "float32" else 1e-2) for e in tensors)
    run = await sync_to_async(Run.objects.get)(pk=run_id)
    stored = await sync_to_async(lambda: list(RunEvent.objects.filter(run=run).order_by("seq")))()
    assert run.status == "done" and [e.event for e in stored] == [f["event"] for f in events_of(frames)]


async def test_settings_outside_the_spec_are_refused_at_the_socket(demo_stack):
    comm = await connect()
    try:
        for params, code in [({"block": 18}, "param_out_of_range"), ({"layers": 0}, "param_out_of_range"),
                             ({"layers": "all"}, "invalid_param"), ({"path": "/etc/passwd"}, "unknown_param")]:
            await send(comm, {"action": "start", "demo": "gguf-inspect", "params": params})
            frame = await recv(comm)
            assert frame["type"] == "error" and frame["code"] == code, (params, frame)
    finally:
        await comm.disconnect()
