"""The run socket's timer (docs/protocol.md, "Never a silent hang" and "Idle sockets"): queue positions, quiet-run
checks and the idle close, driven by the process's one Deadlines (sockets.py) instead of a task per socket.

A socket has one deadline at a time: every TICK while it watches a live run (the old watchdog's period), else when
it will have been idle for DEMO_IDLE_SOCKET_SECONDS. A tick that finds work (a queued run to report, a run quiet
for DEMO_STALL_SECONDS, an idle socket to close) runs it in one short task the socket owns; one that finds none
only sets the next deadline.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable

import redis
from django.conf import settings

from ..models import Run
from ..runstate import REDIS_HEALTH, async_redis, cancel_key, heartbeat_key, judge_heartbeat
from .common import ACTIVE, Watch, get_run, set_status
from .sockets import SocketHub

log = logging.getLogger(__name__)
CLOSE_IDLE = 4408  # docs/protocol.md: closed after DEMO_IDLE_SOCKET_SECONDS without a message or a run
# A socket's deadline key: a number, not the consumer, so that the timer's tables never hold a consumer alive.
_timer_keys = itertools.count()


def _current_task() -> asyncio.Task | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop: a consumer closed by the garbage collector after its loop ended
        return None


class WatchdogMixin:
    """The timer half of `DemoConsumer` (protocol.py); `_stop_timer` is part of its teardown."""

    watches: dict[str, Watch]
    _hub: SocketHub  # the running loop's, taken when the socket opens (its teardown may run where none is running)
    used_at: float  # the socket's last message other than `ping`, or the end of its last run (monotonic)
    _tick_task: asyncio.Task | None = None
    _timer_stopped = False
    _timer_key: int | None = None
    _release: Callable[[], None]  # the consumer's synchronous teardown (protocol.DemoConsumer)

    def _key(self) -> int:
        if self._timer_key is None:
            self._timer_key = next(_timer_keys)
        return self._timer_key

    def _tick_seconds(self) -> float:
        return min(1.0, settings.DEMO_STALL_SECONDS / 2)

    def _watching_live(self) -> bool:
        return any(not w.finished and not w.replay for w in self.watches.values())

    def _arm(self) -> None:
        """(Re)set this socket's one deadline from what it does now; call after a watch is added."""
        if self._timer_stopped:
            return
        now = time.monotonic()
        idle = settings.DEMO_IDLE_SOCKET_SECONDS
        if self._watching_live():
            when = now + self._tick_seconds()
        elif idle <= 0:
            self._hub.deadlines.cancel(self._key())
            return
        elif self.watches:  # a replay streams by its own task: not idle, look again later
            when = now + idle
        else:
            when = self.used_at + idle
        self._hub.deadlines.set(self._key(), when, self._on_timer)

    def _stop_timer(self) -> None:
        """No deadline and no tick task survive this (sync: it runs even in a cancelled application)."""
        self._timer_stopped = True
        self._hub.deadlines.cancel(self._key())
        task, self._tick_task = self._tick_task, None
        if task is not None and not task.done() and task is not _current_task():
            task.cancel()  # not the idle close releasing from within: it ends by itself once the close is sent

    def _on_timer(self) -> None:
        if self._timer_stopped:
            return
        if self._tick_task is not None and not self._tick_task.done():
            self._arm()  # the last tick still waits on the database: look again next period
            return
        now = time.monotonic()
        idle = settings.DEMO_IDLE_SOCKET_SECONDS
        if not self.watches and idle > 0 and now - self.used_at >= idle:
            self._tick_task = asyncio.get_running_loop().create_task(self._close_idle(idle))
        elif self._has_work(now):
            self._tick_task = asyncio.get_running_loop().create_task(self._tick())
        else:
            self._arm()

    def _has_work(self, now: float) -> bool:
        stall = settings.DEMO_STALL_SECONDS
        return any(not w.finished and (w.queued or (not w.replay and now - w.last_activity >= stall))
                   for w in self.watches.values())

    async def _close_idle(self, idle: float) -> None:
        self._release()  # no longer counted: messages still in flight are ignored, and a new socket may take its place
        await self._send({"type": "error", "code": "idle_timeout", "message":
                          f"closed after {round(idle / 60)} minutes without use; it reopens when you start a run"})
        await self.close(code=CLOSE_IDLE)

    async def _tick(self) -> None:
        """One pass of the watchdog: never a silent hang; a quiet run is checked against the database and its
        heartbeat."""
        try:
            stall = settings.DEMO_STALL_SECONDS
            queue_timeout = settings.DEMO_QUEUE_TIMEOUT
            for w in list(self.watches.values()):
                if w.queued and not w.finished:
                    try:
                        await self._report_queue(w)
                    except asyncio.CancelledError:
                        raise
                    except Exception:  # noqa: BLE001 - a missed position update is harmless
                        log.exception("queue position of run %s failed", w.run_id)
                if w.finished or w.replay or time.monotonic() - w.last_activity < stall:
                    continue
                if w.queued and time.time() - w.created < queue_timeout:
                    continue  # still in the queue view: nothing to ask the database until it could time out
                try:
                    await self._check_quiet_run(w, queue_timeout)
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001
                    log.exception("watchdog check of run %s failed", w.run_id)
        finally:
            self._tick_task = None
            self._arm()

    async def _check_quiet_run(self, w: Watch, queue_timeout: float) -> None:
        run = await get_run(w.run_id)
        if run is None:
            await self._finish(w, {"type": "error", "run_id": w.run_id, "code": "not_found",
                                   "message": "the run disappeared"})
            return
        if run.is_final:  # its final message was lost (e.g. the socket resubscribed late)
            await self._finish(w, self._final_frame(run))
            return
        if run.status == Run.Status.RUNNING:
            asked = time.monotonic()
            try:
                present = bool(await async_redis().exists(heartbeat_key(w.run_id)))
            except (redis.exceptions.RedisError, OSError) as exc:
                REDIS_HEALTH.trouble()  # no worker can refresh a heartbeat now either: judge it after
                log.warning("heartbeat of run %s unreadable, Redis unavailable: %s", w.run_id, exc)
                return
            lost, w.hb_missing_since = judge_heartbeat(present, asked, w.hb_missing_since,
                                                       settings.DEMO_HEARTBEAT_GRACE)
            if present:
                # Alive but quiet here: catch up from storage in case live messages went missing.
                async with w.lock:
                    if not w.finished:
                        await self._send_stored(w)
                return
            if not lost:  # missing, but not yet for the grace period on a healthy Redis
                return
            msg = "the worker running this demo stopped responding"
            if await set_status(w.run_id, Run.Status.ERROR, only_if=ACTIVE,
                                 error_code="worker_lost", error_message=msg):
                await self._finish(w, {"type": "error", "run_id": w.run_id, "code": "worker_lost",
                                       "message": msg})
            else:
                await self._finish(w, self._final_frame(await get_run(w.run_id)))
            return
        if run.status == Run.Status.QUEUED and time.time() - run.created_at.timestamp() > queue_timeout:
            await async_redis().set(cancel_key(w.run_id), "queue_timeout", ex=3600)
            msg = "no worker picked up the run in time; try again later"
            if await set_status(w.run_id, Run.Status.ERROR, only_if=(Run.Status.QUEUED,),
                                 error_code="queue_timeout", error_message=msg):
                await self._finish(w, {"type": "error", "run_id": w.run_id, "code": "queue_timeout",
                                       "message": msg})
