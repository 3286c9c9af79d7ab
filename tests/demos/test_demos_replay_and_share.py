"""Issue 15: live by default, replay by choice (or under load), labelled with the original run's date, device
and engine version; share links to finished runs (unguessable ids, clean 404s); the visitor's stored runs."""
from __future__ import annotations

import json
import os
import re
from datetime import datetime

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from demos.models import Run, RunEvent

from demo_helpers import collect, connect, events_of, recv, send

PARAMS = {"prompt": "The capital of France is", "max_new_tokens": 3, "temperature": 0.0}  # a preset's text


async def start_frames(comm, params=PARAMS, demo="kv-cache", **extra) -> tuple[dict, list[dict]]:
    await send(comm, {"action": "start", "demo": demo, "params": params, **extra})
    accepted = await recv(comm)
    assert accepted["type"] == "accepted", accepted
    return accepted, await collect(comm)


def header_of(frames) -> dict:
    headers = [f for f in frames if f["type"] == "header"]
    assert headers, [f["type"] for f in frames]
    return headers[-1]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(240)
async def test_free_slot_runs_live_and_a_forced_replay_is_labelled_with_date_device_and_version(demo_stack):
    from demos.versions import engine_version
    from demos.admission import has_free_slot, worker_slots

    from demos.runstate import sync_redis

    reported = [json.loads(sync_redis().get(k) or "{}") for k in sync_redis().scan_iter(match="demos:worker:*")]
    assert any(w.get("pid") == demo_stack.procs["worker"].pid and w.get("slots") == 2 for w in reported), reported
    assert await worker_slots() >= 2 and await has_free_slot()  # the stack's worker reports its -c 2
    comm = await connect()
    try:
        first, first_frames = await start_frames(comm)
        again, again_frames = await start_frames(comm)  # identical and stored: still live, a slot is free
        asked, asked_frames = await start_frames(comm, replay=True)
    finally:
        await comm.disconnect()
    original = await sync_to_async(Run.objects.get)(pk=first["run_id"])
    assert original.status == "done" and original.device == "cpu" and original.dtype

    # Live: a worker ran it, and its header came before its first event, naming what measured it.
    for accepted, frames in ((first, first_frames), (again, again_frames)):
        assert accepted["mode"] == "live" and "replayed_from" not in accepted
        assert frames[-1]["type"] == "done" and "replayed_from" not in frames[-1]
        header = header_of(frames)
        assert frames.index(header) < frames.index(events_of(frames)[0])
        assert header["mode"] == "live" and header["device"] == "cpu" and header["dtype"] == original.dtype
        assert header["engine_version"] == engine_version() and header["model"]
    assert header_of(first_frames)["measured_at"] == original.started_at.isoformat()
    assert again["run_id"] != first["run_id"] and (await sync_to_async(Run.objects.get)(pk=again["run_id"])).worker != "replay"

    # Asked for: a replay of the newest identical run, labelled with that run's date, device and engine version.
    assert asked["mode"] == "replay" and asked["replay_reason"] == "requested"
    assert asked["replayed_from"] == again["run_id"]  # the visitor's own run: named
    label = header_of(asked_frames)
    assert asked_frames[0] is label  # right after `accepted`, before any event
    source = await sync_to_async(Run.objects.get)(pk=again["run_id"])
    assert label["mode"] == "replay" and label["replay_reason"] == "requested"
    assert label["measured_at"] == source.started_at.isoformat()
    assert datetime.fromisoformat(label["measured_at"]) < timezone.now()
    assert (label["device"], label["dtype"], label["engine_version"]) == ("cpu", source.dtype, source.engine_version)
    assert asked_frames[-1]["type"] == "done" and asked_frames[-1]["summary"]["replayed"] is True
    assert [e["event"] for e in events_of(asked_frames)] == [e["event"] for e in events_of(again_frames)]
    replay = await sync_to_async(Run.objects.get)(pk=asked["run_id"])
    assert replay.replay_of_id == source.id and replay.replay_reason == "requested" and replay.worker == "replay"


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(240)
async def test_no_free_slot_replays_a_deterministic_run_and_says_why(demo_stack, settings):
    comm = await connect()
    try:
        stored, _ = await start_frames(comm)
        settings.DEMO_WORKER_SLOTS = 1
        # Another visitor's run holds the only slot.
        busy = await sync_to_async(Run.objects.create)(demo="kv-cache", owner="s:someone", params={},
                                                       status=Run.Status.RUNNING, started_at=timezone.now())
        try:
            loaded, loaded_frames = await start_frames(comm)
            # Nothing identical stored: a replay cannot stand in, so it waits for the slot like any run.
            await send(comm, {"action": "start", "demo": "kv-cache",
                              "params": {**PARAMS, "prompt": "A prompt nobody ran before, under load"}})
            queued = await recv(comm)
        finally:
            await sync_to_async(Run.objects.filter(pk=busy.pk).update)(status=Run.Status.ERROR)
        rest = await collect(comm)
    finally:
        await comm.disconnect()
    assert loaded["mode"] == "replay" and loaded["replay_reason"] == "busy"
    assert loaded["replayed_from"] == stored["run_id"]
    header = header_of(loaded_frames)
    assert header["mode"] == "replay" and header["replay_reason"] == "busy" and header["device"] == "cpu"
    assert queued["type"] == "accepted" and queued["mode"] == "live" and "replayed_from" not in queued
    assert rest[-1]["type"] == "done" and "replayed_from" not in rest[-1]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(240)
async def test_a_replay_asked_for_with_nothing_stored_runs_live_and_says_so(demo_stack):
    comm = await connect()
    try:
        accepted, frames = await start_frames(comm, {**PARAMS, "prompt": "Never run before: the colour of"},
                                              replay=True)
    finally:
        await comm.disconnect()
    assert accepted["mode"] == "live" and accepted["replay_unavailable"] is True
    assert header_of(frames)["mode"] == "live" and frames[-1]["type"] == "done"
    assert re.fullmatch(r"[A-Za-z0-9_-]{16}", accepted["share_id"])


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(240)
async def test_a_replay_of_another_visitors_run_and_both_share_links_name_no_worker_or_run_id(demo_stack):
    from django.test import AsyncClient

    from demo_helpers import visitor_cookie

    theirs = await connect(await sync_to_async(visitor_cookie)())
    mine = await connect(await sync_to_async(visitor_cookie)())
    try:
        live, live_frames = await start_frames(theirs)
        replayed, replay_frames = await start_frames(mine, replay=True)  # a preset's prompt: public, replayable
    finally:
        await theirs.disconnect()
        await mine.disconnect()
    source = await sync_to_async(Run.objects.get)(pk=live["run_id"])
    assert source.worker and live_frames[-1]["summary"]["worker"] == source.worker  # the owner's own frame
    assert replayed["mode"] == "replay" and replayed["replayed_from"] != live["run_id"]
    assert "worker" not in replay_frames[-1]["summary"] and replay_frames[-1]["summary"]["replayed"] is True
    host, _, pid = source.worker.rpartition(":")
    client = AsyncClient()
    for accepted in (live, replayed):
        for suffix in ("", "run.json"):
            response = await client.get(f"/demos/runs/{accepted['share_id']}/{suffix}")
            text = response.content.decode()
            assert response.status_code == 200 and accepted["share_id"] in text
            # As whole words: a random share id may contain a short host name's letters ("vm" in "…FvmWg…").
            assert source.worker not in text and not re.search(rf"\b{re.escape(host)}\b", text)
            assert not re.search(rf":{pid}\b", text) and f'"{pid}"' not in text
            assert live["run_id"] not in text and replayed["run_id"] not in text


def stored_run(status="done", owner="s:sharer", summary=None, **fields) -> Run:
    run = Run.objects.create(demo="kv-cache", owner=owner, params={"prompt": "Hi", "max_new_tokens": 2},
                             status=status, model="smollm2-135m", engine_version="0123456789abcdef",
                             device="cpu", dtype="float32", started_at=timezone.now(), finished_at=timezone.now(),
                             summary=summary or {"n_generated": 2}, **fields)
    RunEvent.objects.create(run=run, seq=0, type="run_started", event={"type": "run_started", "device": "cpu"})
    RunEvent.objects.create(run=run, seq=1, type="token", event={"type": "token", "step": 0})
    return run


@pytest.mark.django_db
def test_a_finished_run_opens_by_its_share_link_read_only(client):
    run = stored_run()
    page = client.get(f"/demos/runs/{run.share_id}/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "nothing runs on the server" in body and "cpu" in body and "0123456789abcdef" in body
    assert f"/demos/runs/{run.share_id}/run.json" in body and "kv-cache.js" in body  # the demo draws it
    data = client.get(f"/demos/runs/{run.share_id}/run.json").json()
    assert data["demo"] == "kv-cache" and data["params"] == run.params and data["status"] == "done"
    assert [e["type"] for e in data["events"]] == ["run_started", "token"]
    assert data["header"]["device"] == "cpu" and data["header"]["engine_version"] == "0123456789abcdef"
    assert data["header"]["mode"] == "live" and data["share_url"] == f"/demos/runs/{run.share_id}/"
    # A replay's link draws the original's events and says it was a replay.
    replay = Run.objects.create(demo="kv-cache", owner="s:other", params=run.params, status="done", replay_of=run,
                                replay_reason="busy", worker="replay")
    shared = client.get(f"/demos/runs/{replay.share_id}/run.json").json()
    assert len(shared["events"]) == 2 and shared["header"]["mode"] == "replay"
    assert shared["header"]["replay_reason"] == "busy" and shared["header"]["device"] == "cpu"


WORKER = "gpu-box-7.lab.internal:48213"  # what a worker records about itself: host and process id


def assert_names_no_worker_nor_run_row(text: str, *runs: Run) -> None:
    for secret in ("gpu-box-7", "48213", *(str(r.id) for r in runs), *(r.id.hex for r in runs)):
        assert secret not in text, secret


@pytest.mark.django_db
def test_a_share_link_shows_no_worker_host_or_pid_and_no_internal_run_id(client):
    run = stored_run(worker=WORKER, summary={"n_generated": 2, "finish_reason": "length", "worker": WORKER})
    replay = Run.objects.create(demo="kv-cache", owner="s:other", params=run.params, status="done", replay_of=run,
                                replay_reason="busy", worker="replay", summary={**run.summary, "replayed": True})
    for shared in (run, replay):
        page = client.get(f"/demos/runs/{shared.share_id}/")
        data = client.get(f"/demos/runs/{shared.share_id}/run.json")
        assert page.status_code == data.status_code == 200
        assert_names_no_worker_nor_run_row(page.content.decode() + data.content.decode(), run, replay)
        # What the student needs is all there: device, dtype, engine version, date, params, events.
        body = data.json()
        assert body["share_id"] == shared.share_id and body["params"] == run.params and len(body["events"]) == 2
        assert {k: body["header"][k] for k in ("device", "dtype", "engine_version")} == {
            "device": "cpu", "dtype": "float32", "engine_version": "0123456789abcdef"}
        assert body["header"]["measured_at"] and body["summary"]["n_generated"] == 2
        assert "cpu" in page.content.decode() and "0123456789abcdef" in page.content.decode()


@pytest.mark.django_db
def test_unknown_malformed_or_unfinished_share_ids_are_a_clean_404(client):
    running = stored_run(status="running")
    cancelled = stored_run(status="cancelled")
    done = stored_run()
    bad = ["AAAAAAAAAAAAAAAA", "short", "x" * 33, "bad$id!!!!", "%00%00%00%00%00%00%00%00", "..%2F..%2Fetc",
           str(done.id), running.share_id, cancelled.share_id, "ünïcödé-ïd-ünïcödé"]
    for share_id in bad:
        for suffix in ("", "run.json"):
            response = client.get(f"/demos/runs/{share_id}/{suffix}")
            assert response.status_code == 404, (share_id, suffix)
            assert b"Traceback" not in response.content
    assert client.get(f"/demos/runs/{done.share_id}/").status_code == 200


@pytest.mark.django_db
def test_share_ids_are_unguessable_and_not_sequential():
    ids = [stored_run().share_id for _ in range(40)]
    assert len(set(ids)) == 40
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{16}", i) for i in ids)  # 96 random bits each
    assert ids != sorted(ids)  # not a counter: creation order is not their order
    # Not derived from the run's id or from each other: no long common prefix between neighbours.
    assert max(len(os.path.commonprefix([a, b])) for a, b in zip(ids, ids[1:])) < 6


@pytest.mark.django_db
def test_my_runs_lists_only_this_visitors_finished_runs_of_one_demo(client):
    from demos.identity import owners_for_request

    assert client.get("/demos/runs/mine.json?demo=kv-cache").json()["runs"] == []  # no session: no runs, none made
    client.post("/demos/visitor/")  # the visitor's first run makes their session
    request = type("R", (), {"session": client.session, "user": None})()
    (owner,) = owners_for_request(request)
    mine = stored_run(owner=owner)
    stored_run(owner=owner, status="running")
    stored_run(owner="s:someone-else")
    data = client.get("/demos/runs/mine.json?demo=kv-cache").json()
    assert [r["share_id"] for r in data["runs"]] == [mine.share_id]
    assert data["runs"][0]["header"]["device"] == "cpu" and data["runs"][0]["data_url"].endswith("/run.json")
    assert client.get("/demos/runs/mine.json?demo=nope").status_code == 404
