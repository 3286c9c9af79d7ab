"""Issue 8: concurrent students' cached runs are batched by one worker's engine, and the dashboard shows it."""
from __future__ import annotations

import asyncio

import pytest

from demo_helpers import assert_contiguous, collect, connect, events_of, recv, start, visitor_cookie

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

PROMPTS = ["The capital of France is", "Water boils at", "The largest planet is", "A haiku about rain:"]



async def one_student(prompt: str) -> list[dict]:
    from asgiref.sync import sync_to_async

    comm = await connect(await sync_to_async(visitor_cookie)())
    try:
        await start(comm, {"prompt": prompt, "max_new_tokens": 16, "use_cache": True, "temperature": 0.0})
        return await collect(comm, timeout=180)
    finally:
        await comm.disconnect()


async def forwards_so_far() -> int:
    """The fused-step forwards the stack's worker reported so far (earlier tests of the session ran some)."""
    comm = await connect(path="/ws/demos/dashboard/")
    try:
        stats = await recv(comm, timeout=10)
    finally:
        await comm.disconnect()
    loaded = [w for w in stats["workers"] if w["engine_loaded"]]
    return loaded[0]["steps_by_path"].get("cpu-fused-step fp32", 0) if loaded else 0


async def test_concurrent_students_share_forward_passes(demo_stack):
    before = await forwards_so_far()
    runs = await asyncio.gather(*(one_student(p) for p in PROMPTS))
    batch_sizes = []
    for frames in runs:
        assert frames[-1]["type"] == "done", frames[-1]
        events = events_of(frames)
        assert_contiguous(events)
        batch_sizes += [e["event"]["batch_size"] for e in events if e["event"]["type"] == "token"]
    assert max(batch_sizes) > 1, batch_sizes  # at least one step ran several students' tokens at once

    # Workers publish stats every DEMO_STATS_INTERVAL, so the first frame may predate these runs: read frames
    # until one shows the batch (a few intervals at most).
    comm = await connect(path="/ws/demos/dashboard/")
    try:
        for _ in range(10):
            stats = await recv(comm, timeout=10)
            worker = next(w for w in stats["workers"] if w["engine_loaded"])
            if worker["max_batch_size"] > 1:
                break
    finally:
        await comm.disconnect()
    assert worker["max_batch_size"] > 1, worker
    assert worker["dtype"] == "float32" and worker["kernel"] == "cpu-fused-step fp32", worker  # what a step runs
    # forwards per path (the snapshot may predate the last steps): the students' steps ran the fused step
    assert set(worker["steps_by_path"]) == {"cpu-fused-step fp32"}, worker["steps_by_path"]
    # ... plus each run's closing comparison: KV_REPEATS × both settings × (a prefill, the decodes it times and
    # the one after them), and the worker's warm-up decode
    from demos.catalog.kv_cache import KV_REPEATS, STEPS_PER_SAMPLE

    comparison_forwards = KV_REPEATS * 2 * (2 + STEPS_PER_SAMPLE) + 2
    most = len(batch_sizes) + len(PROMPTS) * (1 + comparison_forwards)
    assert 0 < worker["steps_by_path"]["cpu-fused-step fp32"] - before <= most
    assert worker["kv_blocks_total"] > 0 and worker["kv_blocks_used"] <= worker["kv_blocks_total"]
