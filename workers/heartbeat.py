"""A running run's liveness, both ways: the worker's heartbeat (so the web side's reaper knows the worker is alive)
and the cancel check (so the worker knows the run is still wanted)."""
from __future__ import annotations

import logging
import threading
import time

import redis

from django.conf import settings

from demos.runstate import cancel_key, heartbeat_key, sync_redis, unwatched_for

from .stats import WORKER_NAME

log = logging.getLogger(__name__)


class Heartbeat:
    """Refreshes the run's heartbeat key from a thread, so a long step or the model load still counts."""

    def __init__(self, run_id: str):
        self.key = heartbeat_key(run_id)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=f"hb-{run_id[:8]}", daemon=True)

    def _loop(self):
        interval = settings.DEMO_HEARTBEAT_INTERVAL
        ttl_ms = int(settings.DEMO_HEARTBEAT_TTL * 1000)
        r = sync_redis()
        while not self.stop.is_set():
            try:
                r.set(self.key, WORKER_NAME, px=ttl_ms)
            except Exception as exc:  # noqa: BLE001
                log.warning("heartbeat failed: %s", exc)
            self.stop.wait(interval)

    def __enter__(self):
        sync_redis().set(self.key, WORKER_NAME, px=int(settings.DEMO_HEARTBEAT_TTL * 1000))
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=2)
        try:
            sync_redis().delete(self.key)
        except Exception:  # noqa: BLE001
            pass


class CancelCheck:
    """`should_stop` for the engine: a user cancel, a socket gone longer than the grace period, or the run ended
    elsewhere (failed by a server while this worker was stopped or cut off: `RunState.still_running` says so)."""

    # The engine asks before every step, with the engine's lock held: a Redis read each time kept every other
    # direct run waiting through it (bench/frame_path.py). The flag at most every FLAG_CHECK_INTERVAL, who watches
    # at most every WATCH_CHECK_INTERVAL; a cancel is still seen within a fraction of a second.
    FLAG_CHECK_INTERVAL = 0.2
    WATCH_CHECK_INTERVAL = 1.0

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.key = cancel_key(run_id)
        self.grace = settings.DEMO_ORPHAN_GRACE
        self.reason: str | None = None
        self.watch_checked = 0.0
        self.flag_checked = float("-inf")

    def __call__(self) -> bool:
        if self.reason:
            return True
        if time.monotonic() - self.flag_checked < self.FLAG_CHECK_INTERVAL:
            return False
        self.flag_checked = time.monotonic()
        try:
            cancel = sync_redis().get(self.key)
            if cancel:
                self.reason = cancel.decode() or "user"
            elif time.monotonic() - self.watch_checked >= self.WATCH_CHECK_INTERVAL:
                self.watch_checked = time.monotonic()
                gone = unwatched_for(self.run_id)
                if gone is not None and gone > self.grace:
                    self.reason = "client_gone"
        except redis.exceptions.RedisError as exc:
            # Redis down or restarting: no flag can be read, so nobody asked to stop. Keep going (events
            # go to the database; a resumed client reads them); a cancel is seen once Redis is back.
            log.warning("run %s: cancel check skipped, Redis unavailable: %s", self.run_id, exc)
            return False
        return self.reason is not None


def owner_gone(run_id: str) -> bool:
    """Whether every socket of the run went away longer than DEMO_ORPHAN_GRACE ago (nobody can be watching or
    resume it in time). Redis unreachable: False (run it; a cancel is still seen between its steps)."""
    try:
        gone = unwatched_for(run_id)
    except redis.exceptions.RedisError:
        return False
    return gone is not None and gone > settings.DEMO_ORPHAN_GRACE
