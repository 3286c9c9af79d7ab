"""The structured-output demo over a real websocket, Redis and worker: a schema the catalog does not offer, or more
validity runs than it allows, is refused with a message naming the limit and queues nothing; a small run streams
its mask steps and ends with every constrained reply valid."""
from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from demo_helpers import collect, connect, events_of, recv, send, start

from demos.models import Run

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


async def test_bad_params_are_refused_and_a_small_run_streams_its_masks(demo_stack):
    before = await sync_to_async(Run.objects.count)()
    comm = await connect()
    try:
        refused = []
        for params in ({"schema": "anything-goes"}, {"runs": 1000}, {"schema": {"type": "object"}}):
            await send(comm, {"action": "start", "demo": "structured-output", "params": params})
            refused.append(await recv(comm))
        assert await sync_to_async(Run.objects.count)() == before
        await start(comm, {"runs": 1, "temperature": 0.0}, demo="structured-output")
        frames = await collect(comm, timeout=240)
    finally:
        await comm.disconnect()
    assert [(f["type"], f["code"]) for f in refused] == [("error", "invalid_param"), ("error", "param_out_of_range"),
                                                          ("error", "invalid_param")], refused
    assert "scientist" in refused[0]["message"] and "100" in refused[1]["message"]
    assert frames[-1]["type"] == "done", frames[-1]
    events = [f["event"] for f in events_of(frames)]
    steps = [e for e in events if e["type"] == "mask_step"]
    assert steps and all(e["runs"]["constrained"]["token_allowed"] for e in steps if "constrained" in e["runs"])
    summary = events[-1]
    assert summary["type"] == "validity_summary" and summary["valid"]["constrained"] == 1
