"""This worker process's stats, published to Redis (`demos:worker:<name>`) for the dashboard, the consumers'
`warming` frames and the start's free-slot count (demos.admission.worker_slots)."""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time

from django.conf import settings

from demos.runstate import sync_redis, worker_key

from .engine import ENGINE, batch_fields, engine_fields

log = logging.getLogger(__name__)

WORKER_NAME = f"{socket.gethostname()}:{os.getpid()}"


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.active = 0
        self.runs_total = 0
        self.runs_failed = 0
        self.tokens_total = 0
        self.token_times: list[float] = []  # monotonic times of recent tokens (last 10 s)
        self.started = time.time()
        self.slots = 0  # this worker's task slots (its -c), reported so a start knows whether one is free
        # Warm-up (workers.startup): the phase now and since when. The worker takes runs only once `ready`.
        self.phase = "starting"
        self.phase_since = time.time()
        self.warmup_started = time.time()
        self._thread = None

    def enter_phase(self, phase: str) -> None:
        """Start a warm-up phase (`kernels`, `loading`, `first_decode`, `ready`) and publish it at once."""
        with self.lock:
            self.phase, self.phase_since = phase, time.time()
        self.publish()

    @property
    def ready(self) -> bool:
        return self.phase == "ready"

    def idle_token(self) -> int | None:
        """None while the worker warms up or runs anything; else a token that changes whenever a run starts, so
        equal tokens before and after a measurement mean the worker was idle throughout."""
        with self.lock:
            return None if self.phase != "ready" or self.active else self.runs_total  # counted as a run starts

    def token(self):
        now = time.monotonic()
        with self.lock:
            self.tokens_total += 1
            self.token_times.append(now)
            if len(self.token_times) > 4096:
                del self.token_times[:2048]

    def snapshot(self) -> dict:
        now = time.monotonic()
        with self.lock:
            self.token_times = [t for t in self.token_times if now - t <= 10.0]
            recent = len(self.token_times)
            window = min(10.0, max(1.0, now - self.token_times[0])) if recent else 10.0
            # During the warm-up the engine's runner may be building its kernels (behind a file lock another
            # process can hold): the stats must not wait for it, or the published phase would expire.
            engine = ENGINE.engine if self.phase == "ready" else None
            return {
                "name": WORKER_NAME,
                "pid": os.getpid(),
                "model": settings.ENGINE_MODEL,
                **engine_fields(engine),
                "slots": self.slots,
                "engine_loaded": ENGINE.loaded,
                # Warm-up: `ready` once the engine has loaded and decoded once (the worker takes runs only
                # then); until then `phase` says what it is doing and `warmup_started` since when.
                "ready": self.phase == "ready",
                "phase": self.phase,
                "phase_since": self.phase_since,
                "warmup_started": self.warmup_started,
                **batch_fields(),
                "tokens_per_s": round(recent / window, 2) if recent else 0.0,
                "tokens_total": self.tokens_total,
                "runs_total": self.runs_total,
                "runs_failed": self.runs_failed,
                "runs_active": self.active,
                "uptime_s": round(time.time() - self.started, 1),
                "updated": time.time(),
            }

    def publish(self):
        interval = settings.DEMO_STATS_INTERVAL
        try:
            sync_redis().set(worker_key(WORKER_NAME), json.dumps(self.snapshot()), ex=max(5, int(interval * 5)))
        except Exception as exc:  # noqa: BLE001 - stats are best effort
            log.debug("stats publish failed: %s", exc)

    def start_reporter(self):
        if self._thread is not None:
            return

        def loop():
            interval = settings.DEMO_STATS_INTERVAL
            while True:
                self.publish()
                time.sleep(interval)

        self._thread = threading.Thread(target=loop, name="demo-stats", daemon=True)
        self._thread.start()

    def forget(self) -> None:
        """Remove this worker's stats from Redis (it is shutting down)."""
        try:
            sync_redis().delete(worker_key(WORKER_NAME))
        except Exception:  # noqa: BLE001
            pass


STATS = Stats()
