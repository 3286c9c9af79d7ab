"""The walking skeleton end to end: websocket → consumer → Celery (real worker, real engine) → Redis
pub/sub → consumer → websocket, with every event persisted."""
from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from demos.models import Run, RunEvent

from demo_helpers import (assert_contiguous, assert_ends_with_the_run_then_its_comparison, collect, connect,
                          events_of, recv, run_events, send, start)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

PARAMS = {"prompt": "The capital of France is", "max_new_tokens": 8, "temperature": 0.0}


async def test_run_delivers_every_event_then_done(demo_stack):
    comm = await connect()
    try:
        run_id = await start(comm, PARAMS)
        frames = await collect(comm)
    finally:
        await comm.disconnect()
    events = events_of(frames)
    assert frames[-1]["type"] == "done", frames[-1]
    assert all(f["run_id"] == run_id for f in frames)
    assert_contiguous(events)
    assert_ends_with_the_run_then_its_comparison(events)
    own = run_events(events)
    kinds = [e["event"]["type"] for e in own]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert kinds.count("token") == 8
    tokens = [e["event"] for e in own if e["event"]["type"] == "token"]
    assert [t["step"] for t in tokens] == list(range(8))
    assert tokens[0]["phase"] == "prefill" and all(t["phase"] == "decode" for t in tokens[1:])
    # The KV cache grows by the same number of bytes for every token.
    per_token = events[0]["event"]["kv_bytes_per_token"]
    assert tokens[-1]["kv_bytes_total"] == per_token * tokens[-1]["position"]
    done = frames[-1]
    assert done["status"] == "done" and done["summary"]["n_generated"] == 8
    assert done["summary"]["text"] == own[-1]["event"]["text"]

    run = await sync_to_async(Run.objects.get)(pk=run_id)
    assert run.status == "done" and run.n_events == len(events) and run.worker
    assert run.started_at and run.finished_at and run.params["max_new_tokens"] == 8
    stored = await sync_to_async(lambda: list(RunEvent.objects.filter(run=run).order_by("seq")))()
    assert [e.seq for e in stored] == [e["seq"] for e in events]
    assert [e.event for e in stored] == [e["event"] for e in events]
    assert all(b.t >= a.t for a, b in zip(stored, stored[1:]))


async def test_the_worker_loads_the_engine_once_and_reuses_it(demo_stack):
    comm = await connect()
    try:
        for prompt in ("Red, green,", "Monday, Tuesday,"):
            await start(comm, {"prompt": prompt, "max_new_tokens": 2})
            assert (await collect(comm))[-1]["type"] == "done"
    finally:
        await comm.disconnect()
    assert demo_stack.logs["worker"].read_text(errors="replace").count("engine smollm2-135m loaded") == 1


async def test_bad_messages_get_error_frames_and_socket_stays_usable(demo_stack, settings):
    comm = await connect()
    try:
        cases = [
            ({"action": "start", "demo": "no-such-demo", "params": {}}, "unknown_demo"),
            ({"action": "start", "demo": "kv-cache", "params": {"max_new_tokens": 10_000}}, "param_out_of_range"),
            ({"action": "start", "demo": "kv-cache", "params": {"max_new_tokens": "8"}}, "invalid_param"),
            ({"action": "start", "demo": "kv-cache", "params": {"use_cache": 1}}, "invalid_param"),
            ({"action": "start", "demo": "kv-cache", "params": {"prompt": ""}}, "invalid_param"),
            ({"action": "start", "demo": "kv-cache", "params": {"bogus": 1}}, "unknown_param"),
            ({"action": "start", "demo": "kv-cache", "params": [1, 2]}, "invalid_params"),
            ({"action": "launch"}, "unknown_action"),
            ({"no": "action"}, "unknown_action"),
            ([1, 2, 3], "invalid_message"),
            ({"action": "resume", "run_id": 5}, "invalid_message"),
            ({"action": "resume", "run_id": "not-a-uuid"}, "not_found"),
            ({"action": "cancel", "run_id": "00000000-0000-0000-0000-000000000000"}, "not_found"),
        ]
        for msg, code in cases:
            await send(comm, msg)
            frame = await recv(comm)
            assert frame["type"] == "error" and frame["code"] == code, (msg, frame)
            assert frame["message"]
        await comm.send_to(text_data="{not json")
        assert (await recv(comm))["code"] == "invalid_json"
        await comm.send_to(bytes_data=b"\x00\x01binary")
        assert (await recv(comm))["code"] == "binary_not_supported"
        await comm.send_to(text_data='{"action":"ping","pad":"' + "x" * settings.DEMO_MAX_MESSAGE_BYTES + '"}')
        assert (await recv(comm))["code"] == "message_too_large"
        # Prompt length is counted in tokens with the real tokenizer.
        settings.DEMO_MAX_PROMPT_TOKENS = 4
        await send(comm, {"action": "start", "demo": "kv-cache", "params": {"prompt": "one two three four five six"}})
        frame = await recv(comm)
        assert frame["code"] == "param_too_long" and "tokens" in frame["message"]
        settings.DEMO_MAX_PROMPT_TOKENS = 512
        # Still usable: a ping and a real run.
        await send(comm, {"action": "ping"})
        assert (await recv(comm))["type"] == "pong"
        await start(comm, {**PARAMS, "max_new_tokens": 3})
        frames = await collect(comm)
        assert frames[-1]["type"] == "done" and len(run_events(events_of(frames))) == 5
    finally:
        await comm.disconnect()
    assert await sync_to_async(Run.objects.count)() == 1  # no run was created for a bad message
