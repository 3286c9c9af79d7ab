"""Admission: which runs may start, and which queued run a free worker slot takes next. The one place of this
policy: the consumer's `start` (demos.consumers.runs) and the worker's `run_demo` (workers.tasks) both call it.

- A start is refused (limit_hit) beyond the per-owner limits, the per-address ceiling and the global queue cap
  (DEMO_MAX_* settings). Over the worker slots a start is not refused: it queues (issue 38: 50 students behind
  one NAT got `too_many_runs` when each address's share of the slots was a hard limit).
- A start runs live while a slot is free (has_free_slot); otherwise a deterministic run may be replayed.
- Queued runs wait in per-owner fair lists (runstate.fair_push/fair_pop); a worker takes the next fair run
  (next_run), not necessarily its ticket's own.
"""
from __future__ import annotations

import json
import logging
import math
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

from channels.db import database_sync_to_async
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from inferencelab.celery import app

from .models import Run
from .runstate import async_redis, fair_pop, fair_push, redis_retry, worker_key

log = logging.getLogger(__name__)

# The Celery task a queued run's ticket names. The name predates the workers/ package and stays, so tickets
# queued by a server of the previous version still find their task (CELERY_TASK_ROUTES routes it).
RUN_DEMO_TASK = "demos.tasks.run_demo"
START_LOCK = "demos:start-lock"  # one start at a time across every Daphne: the limit check and the insert are atomic


class SlotCount:
    """The worker slots this process last counted, and until when (monotonic) that count is used."""

    TTL = 1.0

    def __init__(self) -> None:
        self.valid_until = 0.0
        self.slots = 0

    def fresh(self) -> int | None:
        return self.slots if self.valid_until > time.monotonic() else None

    def store(self, slots: int) -> None:
        self.valid_until, self.slots = time.monotonic() + self.TTL, slots


SLOTS_SEEN = SlotCount()


class Refused(Exception):
    """A start the limits refuse: the protocol's error code, its message and when to try again (seconds)."""

    def __init__(self, code: str, message: str, retry_after: int):
        super().__init__(message)
        self.code, self.message, self.retry_after = code, message, retry_after


def limit_hit(owners: tuple[str, ...], address: str, now=None) -> tuple[str, str, int] | None:
    """(code, message, retry_after) when a new run would break a limit, else None. Call under START_LOCK.

    Per owner (user, session, or for a cookie-less socket its address: one visitor however many sockets):
    DEMO_MAX_CONCURRENT_RUNS active, DEMO_RUNS_PER_MINUTE started per minute. Per client address
    (inferencelab/client_address.py; every address, loopback and `unknown` included), whoever started them: a
    ceiling of DEMO_MAX_RUNS_PER_ADDRESS active and DEMO_RUNS_PER_MINUTE_PER_ADDRESS per minute, sized for a class
    behind one NAT, so that sessions minted from one address buy no more than that. All visitors: DEMO_MAX_QUEUED
    waiting. The worker slots are shared by the queue's order (next_run), not by refusing starts.
    """
    now = now or timezone.now()
    real = Run.objects.filter(replay_of__isnull=True)
    recent_active = real.filter(status__in=Run.ACTIVE, created_at__gte=now - timedelta(minutes=15))
    minute_ago = now - timedelta(seconds=60)
    scopes = [(Q(owner__in=owners), settings.DEMO_MAX_CONCURRENT_RUNS, settings.DEMO_RUNS_PER_MINUTE, ""),
              (Q(client=address[:64]), settings.DEMO_MAX_RUNS_PER_ADDRESS, settings.DEMO_RUNS_PER_MINUTE_PER_ADDRESS,
               " from your network address")]
    for who, max_active, per_minute, where in scopes:
        if recent_active.filter(who).count() >= max_active:
            runs = "run" if max_active == 1 else "runs"
            return ("too_many_runs", f"At most {max_active} {runs} at a time{where}: wait for one to finish.", 2)
        recent = list(Run.objects.filter(who, created_at__gte=minute_ago).order_by("created_at")
                      .values_list("created_at", flat=True)[:per_minute])
        if len(recent) >= per_minute:
            retry = max(1, math.ceil((recent[0] + timedelta(seconds=60) - now).total_seconds()))
            return ("rate_limited", f"At most {per_minute} runs per minute{where}.", retry)
    max_queued = settings.DEMO_MAX_QUEUED
    if real.filter(status=Run.Status.QUEUED, created_at__gte=now - timedelta(minutes=15)).count() >= max_queued:
        return ("busy", f"The demo server is busy: {max_queued} runs are waiting for it. Try again in a minute.", 30)
    return None


async def worker_slots() -> int:
    """How many runs the workers can run at once: DEMO_WORKER_SLOTS when set, else the sum of the slots the live
    workers report (`slots` in their stats, their -c; 16 for a worker that does not say). No worker: 0."""
    configured = settings.DEMO_WORKER_SLOTS
    if configured > 0:
        return configured
    cached = SLOTS_SEEN.fresh()
    if cached is not None:  # one keyspace scan per process per second, however many starts
        return cached
    r = async_redis()
    keys = [k async for k in r.scan_iter(match=worker_key("*"), count=100)]
    total = 0
    for raw in (await r.mget(keys) if keys else []):
        try:
            total += max(0, int(json.loads(raw).get("slots") or 16)) if raw else 0
        except (ValueError, TypeError, AttributeError):
            continue
    SLOTS_SEEN.store(total)
    return total


def _busy_runs() -> int:
    """Real runs (not replays) holding or waiting for a worker slot."""
    recent = timezone.now() - timedelta(minutes=15)
    return Run.objects.filter(replay_of__isnull=True, status__in=Run.ACTIVE, created_at__gte=recent).count()


async def has_free_slot() -> bool:
    """Whether a new run would get a worker slot at once (nothing queued ahead of it, a slot idle). When Redis
    cannot say, assume it would: a run is live unless the server is known to be full."""
    try:
        capacity = await worker_slots()
    except Exception:  # noqa: BLE001
        log.warning("worker slots unknown; starting live")
        return True
    return await database_sync_to_async(_busy_runs)() < capacity


def enqueue(run_id: str, owner: str) -> None:
    """Queue the run fairly (its owner's list, runstate.fair_push) and send one ticket to a worker on the
    queue CELERY_TASK_ROUTES names for RUN_DEMO_TASK (DEMO_TASK_QUEUE, `gpu` by default; no queue is forced
    here, and the fair lists are that queue's)."""
    fair_push(owner, run_id)
    app.send_task(RUN_DEMO_TASK, args=[run_id], task_id=run_id)  # the configured app, not whatever is "current"


def running_counts(owners: list[str]) -> dict[str, tuple[int, int]]:
    """For each waiting owner: (its runs running now, the runs running now from the client address of its oldest
    queued run). A list named by something else (an address, queued before issue 38 made the lists per owner)
    owns no run: (0, 0), so it is served first, not stranded."""
    running = Run.objects.filter(status=Run.Status.RUNNING)
    own = Counter(running.filter(owner__in=owners).values_list("owner", flat=True))
    address_of: dict[str, str] = {}
    for owner, client in (Run.objects.filter(owner__in=owners, status=Run.Status.QUEUED)
                          .order_by("created_at").values_list("owner", "client")):
        address_of.setdefault(owner, client)
    near = Counter(running.filter(client__in=set(address_of.values())).values_list("client", flat=True))
    return {owner: (own[owner], near[address_of[owner]] if owner in address_of else 0) for owner in owners}


def next_run(queue: str | None) -> str | None:
    """The run a worker that took a ticket from `queue` runs next: the waiting owner with the fewest running runs
    goes first, then the one whose address runs fewest (runstate.fair_pop); None when no run waits on that
    queue."""
    return fair_pop(running_counts, queue)


async def replay_reason(*, live: bool, wants_replay: bool, deterministic: bool) -> str:
    """Why a start would be served from a stored identical run: "requested" (the student asked), "busy" (a
    deterministic run while no worker slot is free), or "" (live: the default, and always when `live`)."""
    if live or not settings.DEMO_REPLAY_CACHE:
        return ""
    if wants_replay:
        return "requested"
    if deterministic and not await has_free_slot():
        return "busy"
    return ""


async def admit(owners: tuple[str, ...], address: str, create: Callable[[], Run]) -> Run:
    """`create()` the run if no limit refuses it (limit_hit), under START_LOCK so that the check and the insert
    are one step across every Daphne; raises Refused otherwise."""

    def checked_create() -> Run:
        hit = limit_hit(owners, address)
        if hit:
            raise Refused(*hit)
        return create()

    lock = async_redis().lock(START_LOCK, timeout=10, blocking_timeout=10)
    if not await redis_retry(lock.acquire):
        raise Refused("busy", "The demo server is busy starting other runs. Try again in a moment.", 2)
    try:
        return await database_sync_to_async(checked_create)()
    finally:
        try:
            await lock.release()
        except Exception:  # noqa: BLE001 - expired after its timeout: nothing left to release
            log.warning("start lock expired before release")
