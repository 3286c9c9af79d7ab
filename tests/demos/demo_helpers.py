from __future__ import annotations

import asyncio
import itertools
import json
import time

from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

ORIGIN = (b"origin", b"http://127.0.0.1")
HOST = (b"host", b"127.0.0.1")  # the origin check compares the Origin with the socket's own host and port
FINAL = ("done", "error")


_visitors = itertools.count()


def from_address(address: str):
    """The ASGI app as seen from one client address (the test communicator sets none)."""
    from inferencelab.asgi import application

    async def app(scope, receive, send_):
        return await application({**scope, "client": (address, 40000)}, receive, send_)

    return app


def communicator(*headers, path="/ws/demos/", address: str | None = None) -> WebsocketCommunicator:
    """A socket from `address`, by default a new one per socket: a cookie-less socket's owner is its address,
    so each such communicator is its own visitor."""
    if address is None:
        n = next(_visitors)
        address = f"198.18.{n // 250 % 250}.{n % 250 + 1}"  # the benchmarking range: no real visitor's
    return WebsocketCommunicator(from_address(address), path, headers=[ORIGIN, HOST, *headers])


async def connect(*headers, path="/ws/demos/", address: str | None = None) -> WebsocketCommunicator:
    comm = communicator(*headers, path=path, address=address)
    connected, _ = await comm.connect(timeout=10)
    assert connected
    return comm


async def send(comm, obj) -> None:
    await comm.send_to(text_data=json.dumps(obj))


async def recv(comm, timeout=30.0) -> dict:
    return json.loads(await comm.receive_from(timeout=timeout))


async def collect(comm, timeout=90.0, until=FINAL, stop=None, receive=None) -> list[dict]:
    """Frames until one whose type is in `until` (included), or `stop(frame)` is true. `receive(timeout)`
    reads one frame; by default from `comm`, a Channels test communicator."""
    receive = receive or (lambda left: recv(comm, timeout=left))
    frames = []
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no final frame within {timeout}s; got {[f.get('type') for f in frames]}")
        frame = await receive(left)
        frames.append(frame)
        if frame.get("type") in until or (stop and stop(frame)):
            return frames


async def start(comm, params, demo="kv-cache", **extra) -> str:
    await send(comm, {"action": "start", "demo": demo, "params": params, **extra})
    frame = await recv(comm)
    assert frame["type"] == "accepted", frame
    return frame["run_id"]


def events_of(frames) -> list[dict]:
    return [f for f in frames if f["type"] == "event"]


# A comparison demo ends with its timing of both settings (demos/catalog/comparison.py), after the run's own events.
COMPARISON_EVENTS = ("comparison_sample", "comparison")


def run_events(events) -> list[dict]:
    """The run's own events: without the closing comparison's."""
    return [e for e in events if e["event"]["type"] not in COMPARISON_EVENTS]


def assert_ends_with_the_run_then_its_comparison(events) -> None:
    kinds = [e["event"]["type"] for e in events]
    own = len(run_events(events))
    assert kinds[own - 1] == "run_finished" and set(kinds[own:]) <= set(COMPARISON_EVENTS), kinds[-8:]
    assert kinds[own:] == [] or kinds[-1] == "comparison", kinds[-8:]


def assert_contiguous(events, start=0) -> None:
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(start, start + len(seqs))), seqs


async def wait_for(predicate, timeout=30.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await predicate()
        if value:
            return value
        await asyncio.sleep(interval)
    raise AssertionError("condition not met in time")


@sync_to_async
def get_run(run_id):
    from demos.models import Run

    return Run.objects.get(pk=run_id)


@sync_to_async
def stored_seqs(run_id) -> list[int]:
    from demos.models import RunEvent

    return list(RunEvent.objects.filter(run_id=run_id).order_by("seq").values_list("seq", flat=True))


def visitor_cookie() -> tuple[bytes, bytes]:
    """A new visitor's saved session as a websocket cookie header (call through sync_to_async)."""
    from django.conf import settings
    from django.contrib.sessions.backends.db import SessionStore

    s = SessionStore()
    s["demos"] = True
    s.save()
    return (b"cookie", f"{settings.SESSION_COOKIE_NAME}={s.session_key}".encode())
