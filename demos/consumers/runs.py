"""Starting, limiting, resuming and cancelling runs (the `start`, `resume` and `cancel` actions)."""
from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from datetime import timedelta

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from .. import conf
from ..models import Run
from ..registry import is_deterministic, validate
from ..runstate import async_redis, attach, cancel_key, fair_push, run_group, worker_key
from .common import ACTIVE, ProtocolError, Watch, get_run, redis_retry, set_status
from .replay import cache_key_for, engine_version, replay_source

log = logging.getLogger(__name__)

START_LOCK = "demos:start-lock"  # one start at a time across every Daphne: the limit check and the insert are atomic


def address_share(address: str, slots: int, real_active) -> int:
    """How many runs `address` may have queued or running: its fair share of the worker slots,
    max(1, slots // addresses with active runs, this one counted), and never more than DEMO_MAX_RUNS_PER_ADDRESS."""
    addresses = set(real_active.order_by().values_list("client", flat=True).distinct()) | {address[:64]}
    return min(int(conf.get("DEMO_MAX_RUNS_PER_ADDRESS")), max(1, slots // len(addresses)))


def limit_hit(owners: tuple[str, ...], address: str, slots: int, now=None) -> tuple[str, str, int] | None:
    """(code, message, retry_after) when a new run would break a limit, else None. Call under START_LOCK.

    Per owner (user, session, or for a cookie-less socket its address): DEMO_MAX_CONCURRENT_RUNS active,
    DEMO_RUNS_PER_MINUTE started per minute. Per client address (inferencelab/client_address.py; every address,
    loopback and `unknown` included): its fair share of the `slots` worker slots active (address_share) and
    DEMO_RUNS_PER_MINUTE_PER_ADDRESS per minute. All visitors: DEMO_MAX_QUEUED waiting.

    Invariant: a run is admitted only while its address holds fewer than its share at that moment, so one
    address never holds more than max(1, slots // active addresses) runs it started after the others arrived
    (runs it already held are not pre-empted: a newcomer lowers the share, and the address gets no more until
    it is under it); with fair admission (runstate.fair_pop), a newcomer's run is the next one started when a
    slot frees, however many runs another address sent, and the global queue fills only with many addresses.
    """
    now = now or timezone.now()
    real = Run.objects.filter(replay_of__isnull=True)
    recent_active = real.filter(status__in=ACTIVE, created_at__gte=now - timedelta(minutes=15))
    minute_ago = now - timedelta(seconds=60)
    share = address_share(address, slots, recent_active)
    scopes = [(Q(owner__in=owners), int(conf.get("DEMO_MAX_CONCURRENT_RUNS")), int(conf.get("DEMO_RUNS_PER_MINUTE")),
               ""),
              (Q(client=address[:64]), share, int(conf.get("DEMO_RUNS_PER_MINUTE_PER_ADDRESS")),
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
    max_queued = int(conf.get("DEMO_MAX_QUEUED"))
    if real.filter(status=Run.Status.QUEUED, created_at__gte=now - timedelta(minutes=15)).count() >= max_queued:
        return ("busy", f"The demo server is busy: {max_queued} runs are waiting for it. Try again in a minute.", 30)
    return None


class RunsMixin:
    """The run-lifecycle actions of `DemoConsumer` (protocol.py)."""

    async def _start(self, msg: dict) -> None:
        demo = msg.get("demo")
        params = msg.get("params", {})
        cleaned = await sync_to_async(validate, thread_sensitive=False)(demo, params)
        deterministic = await sync_to_async(is_deterministic)(demo, cleaned)
        version = await sync_to_async(engine_version)()
        key = cache_key_for(demo, cleaned, settings.ENGINE_MODEL, version)
        live = bool(msg.get("live") or msg.get("no_replay"))
        wants_replay = msg.get("replay") is True
        if live and wants_replay:
            raise ProtocolError("invalid_message", "a start is either live or a replay, not both")
        # Live by default. A stored identical run is replayed only when the student asks for one ("replay":
        # true) or, for a deterministic run, when no worker slot is free (docs/protocol.md).
        source, reason = None, ""
        if conf.get("DEMO_REPLAY_CACHE") and not live:
            if wants_replay:
                reason = "requested"
            elif deterministic and not await has_free_slot():
                reason = "busy"
            if reason:
                source = await database_sync_to_async(replay_source)(demo, cleaned, key, self.owners)
        user = self.scope.get("user")
        slots = await known_worker_slots()

        def create() -> Run:
            hit = limit_hit(self.owners, self.client_addr, slots)
            if hit:
                raise ProtocolError(hit[0], hit[1], retry_after=hit[2])
            return Run.objects.create(
                demo=demo, params=cleaned, owner=self.owner, client=self.client_addr[:64],
                user=user if getattr(user, "is_authenticated", False) else None,
                model=settings.ENGINE_MODEL, engine_version=version, cache_key=key, deterministic=deterministic,
                replay_of=source, replay_reason=reason if source else "",
                status=Run.Status.RUNNING if source else Run.Status.QUEUED,
                worker="replay" if source else "", started_at=timezone.now() if source else None,
            )

        lock = async_redis().lock(START_LOCK, timeout=10, blocking_timeout=10)
        if not await redis_retry(lock.acquire):
            raise ProtocolError("busy", "The demo server is busy starting other runs. Try again in a moment.",
                                retry_after=2)
        try:
            run = await database_sync_to_async(create)()
        finally:
            try:
                await lock.release()
            except Exception:  # noqa: BLE001 - expired after its timeout: nothing left to release
                log.warning("start lock expired before release")
        run_id = str(run.id)
        w = Watch(run_id=run_id, source_id=str(source.id) if source else run_id, replay=bool(source))
        self.watches[run_id] = w
        accepted = {"type": "accepted", "run_id": run_id, "demo": demo, "params": cleaned,
                    "mode": "replay" if source else "live", "share_id": run.share_id}
        if self._ref:
            accepted["ref"] = self._ref
        if wants_replay and not source:
            accepted["replay_unavailable"] = True  # nothing stored to replay: this run is live
        if source:
            accepted["replayed_from"] = self._replay_label(source)
            accepted["replay_reason"] = reason
            await self._send(accepted)
            await self._send(await database_sync_to_async(run.header)())
            w.task = asyncio.create_task(self._replay(w))
            return
        await redis_retry(self.channel_layer.group_add, run_group(run_id), self.channel_name)
        await redis_retry(attach, run_id, self.channel_name)
        await self._send(accepted)
        try:
            await sync_to_async(enqueue, thread_sensitive=False)(run_id, run.client)
        except Exception as exc:  # noqa: BLE001
            log.exception("could not queue run %s", run_id)
            await set_status(run_id, Run.Status.ERROR, error_code="queue_unavailable", error_message=str(exc))
            await self._finish(w, {"type": "error", "code": "queue_unavailable",
                                   "message": "the run queue is unavailable; try again shortly"})
            return
        w.queued = True
        await self._report_queue(w, force=True)

    async def _resume(self, msg: dict) -> None:
        run_id = self._run_id(msg)
        after = msg.get("after_seq", -1)
        if isinstance(after, bool) or not isinstance(after, int) or after < -1:
            raise ProtocolError("invalid_message", "after_seq must be an integer ≥ -1", run_id=run_id)
        run = await get_run(run_id, self.owners)
        if run is None:  # someone else's run looks exactly like a missing one
            raise ProtocolError("not_found", "no such run", run_id=run_id)
        old = self.watches.get(run_id)
        if old and old.task:
            old.task.cancel()
        replay = bool(run.replay_of_id)
        w = Watch(run_id=run_id, source_id=str(run.replay_of_id or run.id), replay=replay, last_seq=after)
        self.watches[run_id] = w
        if not replay:
            await redis_retry(self.channel_layer.group_add, run_group(run_id), self.channel_name)
            await redis_retry(attach, run_id, self.channel_name)
            run = await get_run(run_id)  # re-read after subscribing: nothing can slip between
        label = await database_sync_to_async(lambda: self._replay_label(run.replay_of))() if replay else None
        await self._send({"type": "resumed", "run_id": run_id, "after_seq": after, "status": run.status,
                          "share_id": run.share_id, **({"replayed_from": label} if replay else {})})
        if replay or run.started_at:  # a live run still queued gets its header when a worker starts it
            await self._send(await database_sync_to_async(run.header)())
        if replay and not run.is_final:
            w.task = asyncio.create_task(self._replay(w))
            return
        async with w.lock:
            await self._send_stored(w)
        if run.is_final:
            await self._finish(w, await database_sync_to_async(self._final_frame)(run))
        elif run.status == Run.Status.QUEUED:
            w.queued = True
            await self._report_queue(w, force=True)

    async def _cancel(self, msg: dict) -> None:
        run_id = self._run_id(msg)
        run = await get_run(run_id, self.owners)
        if run is None:
            raise ProtocolError("not_found", "no such run", run_id=run_id)
        if run.is_final:
            # Idempotent: a Stop that crosses the run's last event on the wire changes nothing, and the run's own
            # `done` frame (on its way, or already delivered) says how it ended. An error here would overwrite it.
            return
        w = self.watches.get(run_id)
        if run.replay_of_id:
            if w and w.task:
                w.task.cancel()
            summary = {"finish_reason": "cancelled", "replayed": True}
            await set_status(run_id, Run.Status.CANCELLED, only_if=ACTIVE, summary=summary)
            if w:
                await self._finish(w, {"type": "done", "run_id": run_id, "status": "cancelled",
                                       "summary": summary, "replayed_from": self._replay_label(None)})
            return
        await async_redis().set(cancel_key(run_id), "user", ex=3600)
        if run.status == Run.Status.QUEUED:
            # Not picked up yet: finish it here; the worker skips runs that are no longer queued.
            if await set_status(run_id, Run.Status.CANCELLED, only_if=(Run.Status.QUEUED,),
                                summary={"finish_reason": "cancelled", "n_generated": 0}):
                if w:
                    await self._finish(w, {"type": "done", "run_id": run_id, "status": "cancelled",
                                           "summary": {"finish_reason": "cancelled", "n_generated": 0}})


async def worker_slots() -> int:
    """How many runs the workers can run at once: DEMO_WORKER_SLOTS when set, else the sum of the slots the live
    workers report (`slots` in their stats, their -c; 16 for a worker that does not say). No worker: 0."""
    configured = int(conf.get("DEMO_WORKER_SLOTS"))
    if configured > 0:
        return configured
    now = time.monotonic()
    if _slots_seen[0] > now:  # one keyspace scan per process per second, however many starts
        return _slots_seen[1]
    r = async_redis()
    keys = [k async for k in r.scan_iter(match=worker_key("*"), count=100)]
    total = 0
    for raw in (await r.mget(keys) if keys else []):
        try:
            total += max(0, int(json.loads(raw).get("slots") or 16)) if raw else 0
        except (ValueError, TypeError, AttributeError):
            continue
    _slots_seen[:] = [now + 1.0, total]
    return total


_slots_seen: list = [0.0, 0]  # [valid until (monotonic), slots]


def _busy_runs() -> int:
    """Real runs (not replays) holding or waiting for a worker slot."""
    recent = timezone.now() - timedelta(minutes=15)
    return Run.objects.filter(replay_of__isnull=True, status__in=ACTIVE, created_at__gte=recent).count()


async def known_worker_slots() -> int:
    """worker_slots(), or 0 when Redis cannot say (then each address's share is one run)."""
    try:
        return await worker_slots()
    except Exception:  # noqa: BLE001
        log.warning("worker slots unknown; each address gets one run")
        return 0


async def has_free_slot() -> bool:
    """Whether a new run would get a worker slot at once (nothing queued ahead of it, a slot idle). When Redis
    cannot say, assume it would: a run is live unless the server is known to be full."""
    try:
        capacity = await worker_slots()
    except Exception:  # noqa: BLE001
        log.warning("worker slots unknown; starting live")
        return True
    return await database_sync_to_async(_busy_runs)() < capacity


def enqueue(run_id: str, address: str) -> None:
    """Queue the run fairly (its client address's list, runstate.fair_push) and send one ticket to a worker on the
    queue CELERY_TASK_ROUTES names for `demos.tasks.run_demo` (DEMO_TASK_QUEUE, `gpu` by default; no queue is
    forced here, and the fair lists are that queue's)."""
    from inferencelab.celery import app  # the configured app, not whatever app is "current"

    fair_push(address, run_id)
    app.send_task("demos.tasks.run_demo", args=[run_id], task_id=run_id)
