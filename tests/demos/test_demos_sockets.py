"""Issue 43 (leaked watchdogs) and issue 38 (socket caps, idle sockets, a class behind one address): the run
sockets' one timer, their teardown however a connection ends, the caps, the idle close and fair queueing by person.
Real consumers, Redis and worker; the timer's own tests need only an event loop."""
from __future__ import annotations

import asyncio
import gc
import time

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.utils import timezone
from demo_helpers import HOST, ORIGIN, collect, from_address, recv, send
from test_demos_hardening import fresh_session_cookie

from demos.consumers import DemoConsumer
from demos.consumers.sockets import Deadlines, hub
from demos.models import Run

SHORT = {"prompt": "Hi", "max_new_tokens": 2}


class Ticks:
    """Callbacks for the timer, recording the order they ran in."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def make(self, name: str):
        holder = Ticks.Callback(self.seen, name)
        return holder, holder.fire

    class Callback:
        def __init__(self, seen, name):
            self.seen, self.name = seen, name

        def fire(self) -> None:
            self.seen.append(self.name)


async def test_the_timer_serves_many_deadlines_with_one_wakeup_and_forgets_what_is_cancelled():
    timer = Deadlines(asyncio.get_running_loop())
    ticks = Ticks()
    keep = []
    now = time.monotonic()
    for i in range(1000):
        holder, fire = ticks.make(f"s{i}")
        keep.append(holder)
        timer.set(i, now + 0.05, fire)
    late, fire_late = ticks.make("late")
    timer.set("late", now + 0.3, fire_late)
    timer.set("late", now + 0.05, fire_late)  # moved earlier: served with the rest
    gone, fire_gone = ticks.make("cancelled")
    timer.set("gone", now + 0.05, fire_gone)
    timer.cancel("gone")
    await asyncio.sleep(0.6)
    assert len(ticks.seen) == 1001 and "cancelled" not in ticks.seen and ticks.seen.count("late") == 1
    assert timer.wakeups <= 2  # one wake-up for the thousand (RESOLUTION rounds them together), not a thousand
    assert len(timer) == 0 and timer.heap_size() == 0 and not timer.armed()


async def test_the_timer_holds_its_callbacks_weakly():
    timer = Deadlines(asyncio.get_running_loop())
    ticks = Ticks()
    holder, fire = ticks.make("dropped")
    timer.set("k", time.monotonic() + 0.05, fire)
    del holder, fire
    gc.collect()
    await asyncio.sleep(0.4)
    assert ticks.seen == [] and timer.fired == 0 and len(timer) == 0


async def open_socket(*headers, address: str):
    comm = WebsocketCommunicator(from_address(address), "/ws/demos/", headers=[ORIGIN, HOST, *headers])
    connected, _ = await comm.connect(timeout=30)
    assert connected
    return comm


async def refused(comm) -> dict:
    """The frame and close a refused socket gets."""
    frame = await recv(comm, timeout=10)
    closed = await comm.receive_output(timeout=10)
    assert closed == {"type": "websocket.close", "code": 4429}, closed
    return frame


def consumer_tasks() -> list[asyncio.Task]:
    """Tasks that belong to a socket: its application (from_address's wrapper here, Daphne's future in
    production), the two receives its dispatch loop waits on (the client's queue, its channel), its timer's work
    and its replays."""
    from channels.consumer import AsyncConsumer

    names = ("from_address", "Queue.get", "_async_proxy")

    def owned(task: asyncio.Task) -> bool:
        coro = task.get_coro()
        frame = getattr(coro, "cr_frame", None)  # a consumer's own coroutine (a watchdog, a tick, a replay)
        return (any(n in coro.__qualname__ for n in names)
                or (frame is not None and isinstance(frame.f_locals.get("self"), AsyncConsumer)))

    return [t for t in asyncio.all_tasks() if not t.done() and owned(t)]


async def drop(comm: WebsocketCommunicator) -> None:
    """What Daphne does to a consumer that has not ended within its close timeout after the client left: cancel
    its application, with no `websocket.disconnect` handled."""
    comm.future.cancel()
    try:
        await comm.future
    except asyncio.CancelledError:
        pass


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(300)
async def test_thousands_of_dropped_consumers_leave_no_task_no_timer_and_no_count(demo_stack, settings):
    from demos.runstate import sync_redis, watchers_key

    settings.DEMO_MAX_CONCURRENT_RUNS = 5
    n = 2000
    comms = []
    for batch in range(0, n, 50):  # a visitor per address: the flood of issue 43 came through a proxy's clients
        comms += await asyncio.gather(*(open_socket(address=f"198.19.{i // 250}.{i % 250 + 1}")
                                        for i in range(batch, batch + 50)))
    sockets = hub()
    assert sum(sockets.by_owner.values()) == n and len(sockets.deadlines) == n  # each one deadline: its idle close
    # Some are busy in a handler when dropped (the slow consumers Daphne gives up on): one with a queued or running
    # run, one in the middle of its start.
    busy = comms[:5]
    run_ids = []
    for comm in busy:
        await send(comm, {"action": "start", "demo": "kv-cache", "params": {**SHORT, "prompt": "Dropped"}})
        frame = await recv(comm)
        assert frame["type"] == "accepted", frame
        run_ids.append(frame["run_id"])
    await send(comms[5], {"action": "start", "demo": "kv-cache", "params": SHORT})
    await asyncio.sleep(0)  # its start has begun
    assert len(consumer_tasks()) > 2 * n  # what the check below would see if any were left
    await asyncio.gather(*(drop(comm) for comm in comms))
    await asyncio.sleep(0.1)
    left = consumer_tasks()
    assert left == [], [t.get_coro().__qualname__ for t in left[:5]]
    assert sockets.is_idle() and sockets.deadlines.heap_size() == 0 and not sockets.deadlines.armed()
    # Their runs were let go of as a disconnect does: no watcher left, so the orphan grace applies.
    r = sync_redis()
    assert all(r.scard(watchers_key(run_id)) == 0 for run_id in run_ids)
    await asyncio.sleep(1.5)  # longer than the old watchdog's period: still nothing of theirs
    assert consumer_tasks() == [] and sockets.is_idle()
    del comms, busy, comm
    gc.collect()
    assert not [o for o in gc.get_objects() if isinstance(o, DemoConsumer)]  # nothing keeps a dropped one alive


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
async def test_sockets_are_capped_per_visitor_and_per_address(demo_stack, settings):
    settings.DEMO_SOCKETS_PER_VISITOR = 3
    settings.DEMO_SOCKETS_PER_ADDRESS = 5
    cookie = await sync_to_async(fresh_session_cookie)()
    mine = [await open_socket(cookie, address="192.0.2.70") for _ in range(3)]
    fourth = await open_socket(cookie, address="192.0.2.70")
    frame = await refused(fourth)
    assert frame["code"] == "too_many_sockets" and "per visitor" in frame["message"], frame
    # The refused socket runs nothing, whatever it sends before its close arrives.
    before = await sync_to_async(Run.objects.count)()
    await send(fourth, {"action": "start", "demo": "kv-cache", "params": SHORT})
    await asyncio.sleep(0.5)
    assert await sync_to_async(Run.objects.count)() == before
    await mine[0].disconnect()
    again = await open_socket(cookie, address="192.0.2.70")  # a closed tab frees its place
    await send(again, {"action": "ping"})
    assert (await recv(again))["type"] == "pong"
    # Cookie-less sockets of one address are one visitor; other sessions of it count against the address.
    bare = [await open_socket(address="192.0.2.70") for _ in range(2)]
    over = await open_socket(await sync_to_async(fresh_session_cookie)(), address="192.0.2.70")
    frame = await refused(over)
    assert "per network address" in frame["message"], frame
    elsewhere = await open_socket(await sync_to_async(fresh_session_cookie)(), address="192.0.2.71")
    for comm in (*mine[1:], again, *bare, elsewhere, fourth, over):
        await comm.disconnect()
    assert hub().is_idle()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
async def test_an_idle_socket_is_closed_but_not_while_it_has_a_run(demo_stack, settings):
    settings.DEMO_IDLE_SOCKET_SECONDS = 2.0
    pinging = await open_socket(address="192.0.2.80")
    working = await open_socket(address="192.0.2.81")
    opened = time.monotonic()
    await send(working, {"action": "start", "demo": "kv-cache", "params": {**SHORT, "max_new_tokens": 4}})
    for _ in range(3):  # keep-alive pings are not use
        await send(pinging, {"action": "ping"})
        assert (await recv(pinging))["type"] == "pong"
        await asyncio.sleep(0.5)
    frame = await recv(pinging, timeout=5)
    assert frame["type"] == "error" and frame["code"] == "idle_timeout", frame
    assert await pinging.receive_output(timeout=5) == {"type": "websocket.close", "code": 4408}
    frames = await collect(working, timeout=90)
    assert frames[-1]["type"] == "done", frames[-1]
    frame = await recv(working, timeout=10)  # idle from the end of its run, not from its start
    assert frame["code"] == "idle_timeout", frame
    # Measured against the run's own end as the worker stored it: on a busy box the test may read the `done` frame
    # late, so its own clock is no reference (the consumer learns of the end at finished_at or after).
    run_id = frames[-1]["run_id"]
    finished_at = await sync_to_async(lambda: Run.objects.get(pk=run_id).finished_at)()
    idle_for = (timezone.now() - finished_at).total_seconds()
    assert idle_for >= settings.DEMO_IDLE_SOCKET_SECONDS - 0.1, (idle_for, time.monotonic() - opened)
    assert await working.receive_output(timeout=5) == {"type": "websocket.close", "code": 4408}
    for comm in (pinging, working):
        await comm.disconnect()
    assert hub().is_idle()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
async def test_sessions_minted_on_one_address_do_not_push_another_networks_visitor_back(demo_stack):
    from demos.runstate import fair_owners_key, fair_pop, fair_push, fair_queue_key, sync_redis

    def order():
        owners = ("s:nat-1", "s:nat-2", "s:nat-3", "s:home")
        sync_redis().delete(fair_owners_key(), *(fair_queue_key(o) for o in owners))
        for owner in owners:
            fair_push(owner, f"{owner}-run")
        # Nobody runs anything of their own; the NAT's address runs 2 (its other sessions), the home's none.
        counts = {"s:nat-1": (0, 2), "s:nat-2": (0, 2), "s:nat-3": (0, 2), "s:home": (0, 0)}
        first = fair_pop(lambda waiting: {o: counts[o] for o in waiting})
        counts["s:nat-1"] = (1, 3)  # a person already running waits behind those who are not
        rest = [fair_pop(lambda waiting: {o: counts[o] for o in waiting}) for _ in range(4)]
        return [first, *rest]

    assert await sync_to_async(order)() == ["s:home-run", "s:nat-2-run", "s:nat-3-run", "s:nat-1-run", None]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(600)
async def test_a_class_of_sixty_behind_one_address_is_queued_and_served_not_refused(demo_stack):
    """Issue 38: 50 students behind a school's NAT, each one small run: 34 got `too_many_runs` when the address's
    share of the worker slots (two here) was a limit. Now each is queued, told its place, and served."""
    cookies = [await sync_to_async(fresh_session_cookie)() for _ in range(60)]
    comms = [await open_socket(cookie, address="203.0.113.60") for cookie in cookies]
    for i, comm in enumerate(comms):  # a small run each: one layer's attention for a short prompt of their own
        await send(comm, {"action": "start", "demo": "attention", "params": {"prompt": f"Student {i}: hello",
                                                                             "layer": 0, "head": 0}})
    runs = await asyncio.gather(*(collect(comm, timeout=540) for comm in comms))
    for comm in comms:
        await comm.disconnect()
    accepted = [frames[0] for frames in runs if frames[0]["type"] == "accepted"]
    finals = [frames[-1] for frames in runs]
    assert len(accepted) == 60, [f for f in (frames[0] for frames in runs) if f["type"] != "accepted"][:3]
    assert all(f["type"] == "done" and f["status"] == "done" for f in finals), [f for f in finals if f["type"] != "done"][:3]
    positions = [f["position"] for frames in runs for f in frames if f["type"] == "queued"]
    assert positions and max(positions) > 2  # more than the two slots: they waited, and were told where
    owners = await sync_to_async(lambda: set(Run.objects.filter(client="203.0.113.60").values_list("owner", flat=True)))()
    assert len(owners) == 60  # each student their own visitor
