"""The engine dashboard socket (`/ws/demos/dashboard/`): one broadcaster per server process.

Stats (worker snapshots from Redis, queue lengths, run counts from the database) are computed once per
DEMO_STATS_INTERVAL by a single task and sent to every open dashboard socket of the process, so a
thousand sockets cost what one does. Sockets are capped per client address (inferencelab/client_address.py:
behind TRUSTED_PROXIES the real one; loopback and `unknown` are capped like any other). Worker host names and process
ids are shown to staff only; everyone else sees "worker 1", "worker 2", …
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from datetime import timedelta

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from inferencelab import client_address

from ..models import Run
from ..runstate import CPU_QUEUE, async_redis, demo_queue, supervisor_key

log = logging.getLogger(__name__)
PRIVATE_WORKER_FIELDS = ("name", "pid", "hostname", "host")


class Broadcaster:
    """The process's dashboard sockets and the one task that feeds them (started by the first socket)."""

    def __init__(self) -> None:
        self.sockets: set[DashboardConsumer] = set()
        self.task: asyncio.Task | None = None
        self.computed = 0  # stats computations so far (a test reads it)

    def per_address(self) -> Counter:
        return Counter(s.client_addr for s in self.sockets)

    def join(self, socket: "DashboardConsumer") -> None:
        self.sockets.add(socket)
        if self.task is None or self.task.done() or self.task.get_loop() is not asyncio.get_running_loop():
            self.task = asyncio.create_task(self._loop())

    def leave(self, socket: "DashboardConsumer") -> None:
        self.sockets.discard(socket)
        if not self.sockets and self.task is not None:
            self.task.cancel()
            self.task = None

    async def _loop(self) -> None:
        interval = settings.DEMO_STATS_INTERVAL
        while self.sockets:
            try:
                stats = await collect_stats()
                self.computed += 1
                frames = {True: json.dumps(stats), False: json.dumps(public_view(stats))}
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                log.warning("dashboard stats failed: %s", exc)
                error = json.dumps({"type": "error", "code": "stats_unavailable",
                                    "message": "engine statistics are unavailable right now"})
                frames = {True: error, False: error}
            await asyncio.gather(*(s.send(text_data=frames[s.is_staff]) for s in list(self.sockets)),
                                 return_exceptions=True)
            await asyncio.sleep(interval)


BROADCASTER = Broadcaster()


class DashboardConsumer(AsyncWebsocketConsumer):
    """Streams engine stats: per-worker batch (concurrent sequences), tokens/s, runs, queue length."""

    async def connect(self):
        self.client_addr = client_address.for_scope(self.scope)
        user = self.scope.get("user")
        self.is_staff = bool(getattr(user, "is_staff", False))
        await self.accept()
        cap = settings.DEMO_DASHBOARD_SOCKETS_PER_ADDRESS
        if BROADCASTER.per_address()[self.client_addr] >= cap:
            await self.send(text_data=json.dumps({"type": "error", "code": "too_many_sockets", "message":
                            f"At most {cap} dashboard connections per address: close another tab first."}))
            await self.close(code=4429)
            return
        BROADCASTER.join(self)

    async def disconnect(self, code):
        BROADCASTER.leave(self)

    async def receive(self, text_data=None, bytes_data=None):
        await self.send(text_data=json.dumps({"type": "error", "code": "read_only",
                                              "message": "the dashboard socket only streams stats"}))


def public_view(stats: dict) -> dict:
    """The stats without what identifies a machine or process (host names, pids)."""
    workers = []
    for index, worker in enumerate(stats.get("workers", []), start=1):
        shown = {k: v for k, v in worker.items() if k not in PRIVATE_WORKER_FIELDS}
        shown["name"] = f"worker {index}"
        workers.append(shown)
    processes = [{k: v for k, v in p.items() if k != "pid"} for p in stats.get("processes", [])]
    return {**stats, "workers": workers, "processes": processes}


async def collect_stats() -> dict:
    r = async_redis()
    keys = [k async for k in r.scan_iter(match="demos:worker:*", count=100)]
    workers = []
    if keys:
        for raw in await r.mget(keys):
            if raw:
                try:
                    workers.append(json.loads(raw))
                except ValueError:
                    pass
    workers.sort(key=lambda w: w.get("name", ""))
    queue = {name: await r.llen(name) for name in (demo_queue(), CPU_QUEUE)}
    # What `make run` supervises (scripts/run_stack.py): each process's state and restarts. None elsewhere.
    processes = []
    raw = await r.get(supervisor_key())
    if raw:
        try:
            processes = json.loads(raw).get("processes") or []
        except (ValueError, AttributeError):
            processes = []

    def counts():
        since = timezone.now() - timedelta(hours=1)
        recent = Run.objects.filter(created_at__gte=since)
        out = {s: 0 for s in Run.Status.values}
        for status, n in (recent.filter(replay_of__isnull=True).values_list("status")
                          .order_by().annotate(n=Count("id"))):
            out[status] = n
        out["replayed"] = recent.filter(replay_of__isnull=False).count()  # served without a worker
        return out

    return {"type": "stats", "t": time.time(), "workers": workers, "queue": queue, "demo_queue": demo_queue(),
            "processes": processes, "runs_last_hour": await database_sync_to_async(counts)()}
