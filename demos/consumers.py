"""Websocket consumers: `/ws/demos/` (start, resume, cancel demo runs) and `/ws/demos/dashboard/`.

The protocol is documented in docs/protocol.md. Delivery guarantees for one run on one socket:
every event exactly once, in seq order, then exactly one final frame (`done` or `error`). The
worker persists each event before publishing it, and the consumer joins the run's group before
reading stored events, so a resume (or any gap seen live) is filled from the database and live
duplicates are dropped by seq.
"""
from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import logging
import math
import statistics
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

import redis
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from . import conf
from .identity import owner_for_scope
from .models import Run, RunEvent
from .registry import DemoParamError, is_deterministic, validate
from .runstate import (
    GPU_QUEUE,
    CPU_QUEUE,
    async_redis,
    attach,
    cancel_key,
    detach,
    heartbeat_key,
    run_group,
)

log = logging.getLogger(__name__)

ACTIONS = ("start", "resume", "cancel", "ping")
ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING)


def engine_version() -> str:
    try:
        core = importlib.import_module("inference_core")
    except Exception:  # noqa: BLE001 - no engine, no version; the run itself will report the error
        return "unavailable"
    return str(getattr(core, "__version__", "0"))


def cache_key_for(demo: str, params: dict, model: str, version: str) -> str:
    blob = json.dumps({"demo": demo, "params": params, "model": model, "engine": version}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class ProtocolError(Exception):
    def __init__(self, code: str, message: str, **extra):
        super().__init__(message)
        self.code, self.message, self.extra = code, message, extra


@dataclass
class Watch:
    """What this socket knows about one run it is streaming."""

    run_id: str
    source_id: str  # whose stored events to read (a replay reads the original's)
    replay: bool = False
    last_seq: int = -1
    last_activity: float = field(default_factory=time.monotonic)
    created: float = field(default_factory=time.time)
    queued: bool = False  # waiting for a worker: the socket is sent `queued` frames with its position
    last_queue_report: tuple | None = None
    last_queue_sent: float = 0.0
    finished: bool = False
    hb_missing_since: float | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task | None = None


async def _redis_retry(fn, *args, attempts: int = 5, delay: float = 0.2):
    """`await fn(*args)` (an idempotent Redis or channel-layer call), again after a pause if the Redis
    connection was lost.

    After Redis restarts, the first command on a pooled (or the channel layer's pub/sub) connection
    fails with "Connection lost"; the next one reconnects. The pub/sub layer's own receive task
    reconnects at the same time, and a SUBSCRIBE racing it fails with asyncio's RuntimeError
    "readuntil() called while another coroutine is already waiting". Without this, the first resume
    after a restart would answer `internal_error`.
    """
    for attempt in range(attempts):
        try:
            return await fn(*args)
        except (redis.exceptions.ConnectionError, ConnectionError, RuntimeError):
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(delay * (attempt + 1))


# --- database helpers (run in a thread) ---------------------------------------------------------


@database_sync_to_async
def _events_between(source_id: str, after: int, upto: int | None = None) -> list[tuple[int, float, dict]]:
    qs = RunEvent.objects.filter(run_id=source_id, seq__gt=after)
    if upto is not None:
        qs = qs.filter(seq__lte=upto)
    return list(qs.order_by("seq").values_list("seq", "t", "event"))


@database_sync_to_async
def _get_run(run_id: str, owner: str | None = None) -> Run | None:
    qs = Run.objects.filter(pk=run_id)
    if owner is not None:
        qs = qs.filter(owner=owner)
    return qs.first()


@database_sync_to_async
def _queue_position(run_id: str) -> dict | None:
    """Where a queued run stands: runs queued before it (any user), and a wait estimate; None once it left
    the queue. The estimate assumes the runs now running hold every worker slot (true whenever anything
    waits) and that each takes the median time of the last 20 finished runs."""
    run = Run.objects.filter(pk=run_id).values("status", "created_at").first()
    if run is None or run["status"] != Run.Status.QUEUED:
        return None
    real = Run.objects.filter(replay_of__isnull=True)
    ahead = real.filter(status=Run.Status.QUEUED, created_at__lt=run["created_at"]).count()
    slots = max(1, real.filter(status=Run.Status.RUNNING).count())
    recent = (real.filter(status=Run.Status.DONE, started_at__isnull=False, finished_at__isnull=False)
              .order_by("-finished_at").values_list("started_at", "finished_at")[:20])
    durations = [(end - begin).total_seconds() for begin, end in recent]
    typical = statistics.median(durations) if durations else 10.0
    return {"position": ahead + 1, "ahead": ahead, "eta_s": round((ahead // slots + 1) * typical, 1)}


@database_sync_to_async
def _set_status(run_id: str, status: str, *, only_if: tuple = (), **fields) -> bool:
    qs = Run.objects.filter(pk=run_id)
    if only_if:
        qs = qs.filter(status__in=only_if)
    fields["status"] = status
    if status in Run.FINAL:
        fields.setdefault("finished_at", timezone.now())
    return qs.update(**fields) > 0


class DemoConsumer(AsyncWebsocketConsumer):
    groups: list[str] = []

    async def connect(self):
        self.owner = owner_for_scope(self.scope)
        client = self.scope.get("client") or ("", 0)
        self.client_addr = str(client[0] or "")
        self.watches: dict[str, Watch] = {}
        self.rate = float(conf.get("DEMO_MESSAGE_RATE"))
        self.tokens = self.burst = float(conf.get("DEMO_MESSAGE_BURST"))
        self.tokens_at = time.monotonic()
        await self.accept()
        self.watchdog = asyncio.create_task(self._watchdog())

    async def disconnect(self, code):
        wd = getattr(self, "watchdog", None)
        if wd:
            wd.cancel()
        for w in list(self.watches.values()):
            if w.task:
                w.task.cancel()
            if not w.finished and not w.replay:
                # Closed tab or lost network: if no other socket watches the run, the worker
                # cancels it after a grace period unless a resume comes first.
                try:
                    await _redis_retry(detach, w.run_id, self.channel_name, time.time())
                except Exception:  # noqa: BLE001
                    log.exception("could not mark run %s detached", w.run_id)
            await self.channel_layer.group_discard(run_group(w.run_id), self.channel_name)
        self.watches.clear()

    # --- frames ------------------------------------------------------------------------------

    async def _send(self, frame: dict) -> None:
        await self.send(text_data=json.dumps(frame, separators=(",", ":")))

    async def _error(self, code: str, message: str, **extra) -> None:
        frame = {"type": "error", "code": code, "message": message}
        frame.update({k: v for k, v in extra.items() if v is not None})
        if getattr(self, "_ref", None):
            frame["ref"] = self._ref
        await self._send(frame)

    async def receive(self, text_data=None, bytes_data=None):
        self._ref = None  # a client's optional "ref" is echoed on the reply (accepted or error)
        try:
            msg = self._parse(text_data, bytes_data)
            ref = msg.get("ref")
            self._ref = ref if isinstance(ref, str) and len(ref) <= 64 else None
            action = msg["action"]
            if action == "ping":
                await self._send({"type": "pong", "t": time.time()})
            elif action == "start":
                await self._start(msg)
            elif action == "resume":
                await self._resume(msg)
            elif action == "cancel":
                await self._cancel(msg)
        except ProtocolError as exc:
            await self._error(exc.code, exc.message, **exc.extra)
        except DemoParamError as exc:
            await self._error(exc.code, exc.message)
        except Exception:  # noqa: BLE001 - a bug must not kill the socket; say so and go on
            log.exception("error handling a demo message")
            await self._error("internal_error", "the server failed to handle this message")

    def _take_token(self) -> None:
        """Token bucket per socket: a flood gets `slow_down` errors instead of server work."""
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.tokens_at) * self.rate)
        self.tokens_at = now
        if self.tokens < 1.0:
            retry = max(1, math.ceil((1.0 - self.tokens) / self.rate)) if self.rate > 0 else 60
            raise ProtocolError("slow_down", "too many messages; slow down", retry_after=retry)
        self.tokens -= 1.0

    def _parse(self, text_data, bytes_data) -> dict:
        self._take_token()
        limit = int(settings.DEMO_MAX_MESSAGE_BYTES)
        if bytes_data is not None:
            raise ProtocolError("binary_not_supported", "send JSON text frames, not binary")
        if text_data is None:
            raise ProtocolError("invalid_message", "empty message")
        if len(text_data) > limit or len(text_data.encode("utf-8", "surrogatepass")) > limit:
            raise ProtocolError("message_too_large", f"messages are limited to {limit} bytes")
        try:
            msg = json.loads(text_data)
        except (ValueError, RecursionError):
            raise ProtocolError("invalid_json", "the message is not valid JSON")
        if not isinstance(msg, dict):
            raise ProtocolError("invalid_message", "the message must be a JSON object")
        action = msg.get("action")
        if not isinstance(action, str) or action not in ACTIONS:
            raise ProtocolError("unknown_action", f"action must be one of {', '.join(ACTIONS)}")
        return msg

    @staticmethod
    def _run_id(msg) -> str:
        raw = msg.get("run_id")
        if not isinstance(raw, str):
            raise ProtocolError("invalid_message", "run_id must be a string")
        try:
            return str(uuid.UUID(raw))
        except ValueError:
            raise ProtocolError("not_found", "no such run")

    # --- start ---------------------------------------------------------------------------------

    async def _start(self, msg: dict) -> None:
        demo = msg.get("demo")
        params = msg.get("params", {})
        cleaned = await sync_to_async(validate, thread_sensitive=False)(demo, params)
        await self._check_limits()
        deterministic = is_deterministic(demo, cleaned)
        version = await sync_to_async(engine_version)()
        key = cache_key_for(demo, cleaned, settings.ENGINE_MODEL, version)
        source = None
        if deterministic and conf.get("DEMO_REPLAY_CACHE") and not msg.get("no_replay"):
            source = await database_sync_to_async(
                lambda: Run.objects.filter(
                    cache_key=key, status=Run.Status.DONE, replay_of__isnull=True, n_events__gt=0
                )
                .order_by("-finished_at")
                .first()
            )()
        user = self.scope.get("user")
        run = await database_sync_to_async(Run.objects.create)(
            demo=demo,
            params=cleaned,
            owner=self.owner,
            client=self.client_addr[:64],
            user=user if getattr(user, "is_authenticated", False) else None,
            model=settings.ENGINE_MODEL,
            engine_version=version,
            cache_key=key,
            deterministic=deterministic,
            replay_of=source,
            status=Run.Status.RUNNING if source else Run.Status.QUEUED,
            worker="replay" if source else "",
            started_at=timezone.now() if source else None,
        )
        run_id = str(run.id)
        w = Watch(run_id=run_id, source_id=str(source.id) if source else run_id, replay=bool(source))
        self.watches[run_id] = w
        accepted = {"type": "accepted", "run_id": run_id, "demo": demo, "params": cleaned}
        if self._ref:
            accepted["ref"] = self._ref
        if source:
            accepted["replayed_from"] = str(source.id)
            await self._send(accepted)
            w.task = asyncio.create_task(self._replay(w))
            return
        await _redis_retry(self.channel_layer.group_add, run_group(run_id), self.channel_name)
        await _redis_retry(attach, run_id, self.channel_name)
        await self._send(accepted)
        try:
            await sync_to_async(_enqueue, thread_sensitive=False)(run_id)
        except Exception as exc:  # noqa: BLE001
            log.exception("could not queue run %s", run_id)
            await _set_status(run_id, Run.Status.ERROR, error_code="queue_unavailable", error_message=str(exc))
            await self._finish(w, {"type": "error", "code": "queue_unavailable",
                                   "message": "the run queue is unavailable; try again shortly"})
            return
        w.queued = True
        await self._report_queue(w, force=True)

    async def _check_limits(self) -> None:
        max_active = int(conf.get("DEMO_MAX_CONCURRENT_RUNS"))
        per_minute = int(conf.get("DEMO_RUNS_PER_MINUTE"))

        def check():
            now = timezone.now()
            mine = Run.objects.filter(owner=self.owner)
            if self.owner.startswith("c:") and self.client_addr:
                # Session-less sockets: limit by client address so reconnecting doesn't reset it.
                mine = Run.objects.filter(owner__startswith="c:", client=self.client_addr) | mine
            active = mine.filter(status__in=ACTIVE, replay_of__isnull=True,
                                 created_at__gte=now - timedelta(minutes=15)).count()
            if active >= max_active:
                return ("too_many_runs", f"at most {max_active} runs at a time; wait for one to finish", 2)
            recent = list(mine.filter(created_at__gte=now - timedelta(seconds=60))
                          .order_by("created_at").values_list("created_at", flat=True)[:per_minute])
            if len(recent) >= per_minute:
                retry = max(1, math.ceil((recent[0] + timedelta(seconds=60) - now).total_seconds()))
                return ("rate_limited", f"at most {per_minute} runs per minute", retry)
            return None

        hit = await database_sync_to_async(check)()
        if hit:
            code, message, retry = hit
            raise ProtocolError(code, message, retry_after=retry)

    # --- resume and cancel ------------------------------------------------------------------

    async def _resume(self, msg: dict) -> None:
        run_id = self._run_id(msg)
        after = msg.get("after_seq", -1)
        if isinstance(after, bool) or not isinstance(after, int) or after < -1:
            raise ProtocolError("invalid_message", "after_seq must be an integer ≥ -1", run_id=run_id)
        run = await _get_run(run_id, self.owner)
        if run is None:  # someone else's run looks exactly like a missing one
            raise ProtocolError("not_found", "no such run", run_id=run_id)
        old = self.watches.get(run_id)
        if old and old.task:
            old.task.cancel()
        replay = bool(run.replay_of_id)
        w = Watch(run_id=run_id, source_id=str(run.replay_of_id or run.id), replay=replay, last_seq=after)
        self.watches[run_id] = w
        if not replay:
            await _redis_retry(self.channel_layer.group_add, run_group(run_id), self.channel_name)
            await _redis_retry(attach, run_id, self.channel_name)
            run = await _get_run(run_id)  # re-read after subscribing: nothing can slip between
        await self._send({"type": "resumed", "run_id": run_id, "after_seq": after, "status": run.status,
                          **({"replayed_from": str(run.replay_of_id)} if replay else {})})
        if replay and not run.is_final:
            w.task = asyncio.create_task(self._replay(w))
            return
        async with w.lock:
            await self._send_stored(w)
        if run.is_final:
            await self._finish(w, self._final_frame(run))
        elif run.status == Run.Status.QUEUED:
            w.queued = True
            await self._report_queue(w, force=True)

    async def _cancel(self, msg: dict) -> None:
        run_id = self._run_id(msg)
        run = await _get_run(run_id, self.owner)
        if run is None:
            raise ProtocolError("not_found", "no such run", run_id=run_id)
        if run.is_final:
            raise ProtocolError("not_running", f"the run is already {run.status}", run_id=run_id)
        w = self.watches.get(run_id)
        if run.replay_of_id:
            if w and w.task:
                w.task.cancel()
            summary = {"finish_reason": "cancelled", "replayed": True}
            await _set_status(run_id, Run.Status.CANCELLED, only_if=ACTIVE, summary=summary)
            if w:
                await self._finish(w, {"type": "done", "run_id": run_id, "status": "cancelled",
                                       "summary": summary, "replayed_from": str(run.replay_of_id)})
            return
        await async_redis().set(cancel_key(run_id), "user", ex=3600)
        if run.status == Run.Status.QUEUED:
            # Not picked up yet: finish it here; the worker skips runs that are no longer queued.
            if await _set_status(run_id, Run.Status.CANCELLED, only_if=(Run.Status.QUEUED,),
                                 summary={"finish_reason": "cancelled", "n_generated": 0}):
                if w:
                    await self._finish(w, {"type": "done", "run_id": run_id, "status": "cancelled",
                                           "summary": {"finish_reason": "cancelled", "n_generated": 0}})

    # --- delivery ------------------------------------------------------------------------------

    async def _send_stored(self, w: Watch, upto: int | None = None) -> None:
        """Send stored events after w.last_seq (up to `upto`). Caller holds w.lock."""
        for seq, _t, event in await _events_between(w.source_id, w.last_seq, upto):
            if seq != w.last_seq + 1:
                log.error("run %s: stored events have a gap at %s", w.source_id, w.last_seq + 1)
            await self._send({"type": "event", "run_id": w.run_id, "seq": seq, "event": event})
            w.last_seq = seq

    async def _report_queue(self, w: Watch, force: bool = False) -> None:
        """Send `queued` (position, estimate) while the run waits: on a change, else every 5 s."""
        info = await _queue_position(w.run_id)
        async with w.lock:
            if info is None or w.finished or w.last_seq >= 0:
                w.queued = False  # picked up (or over): its events say the rest
                return
            key, now = (info["position"], info["eta_s"]), time.monotonic()
            if force or key != w.last_queue_report or now - w.last_queue_sent >= 5.0:
                w.last_queue_report, w.last_queue_sent = key, now
                await self._send({"type": "queued", "run_id": w.run_id, **info})

    async def _deliver(self, w: Watch, seq: int, event: dict, ts: float | None = None) -> None:
        async with w.lock:
            w.queued = False
            w.last_activity = time.monotonic()
            if w.finished or seq <= w.last_seq:
                return  # already sent (from storage on resume, or a duplicate)
            if seq > w.last_seq + 1:
                await self._send_stored(w, upto=seq - 1)
            frame = {"type": "event", "run_id": w.run_id, "seq": seq, "event": event}
            if ts is not None:
                frame["ts"] = ts  # when the worker published it (live events only)
            await self._send(frame)
            w.last_seq = seq

    async def _finish(self, w: Watch, frame: dict, n_events: int | None = None) -> None:
        frame.setdefault("run_id", w.run_id)
        async with w.lock:
            if w.finished:
                return
            if frame["type"] == "done" or n_events:
                await self._send_stored(w)  # anything persisted but not yet seen live
            w.finished = True
            await self._send(frame)
        self.watches.pop(w.run_id, None)
        if not w.replay:
            await self.channel_layer.group_discard(run_group(w.run_id), self.channel_name)

    @staticmethod
    def _final_frame(run: Run) -> dict:
        if run.status == Run.Status.ERROR:
            return {"type": "error", "run_id": str(run.id), "code": run.error_code or "run_failed",
                    "message": run.error_message or "the run failed"}
        frame = {"type": "done", "run_id": str(run.id), "status": run.status, "summary": run.summary}
        if run.replay_of_id:
            frame["replayed_from"] = str(run.replay_of_id)
        return frame

    # group messages from the worker
    async def run_event(self, message):
        w = self.watches.get(message["run_id"])
        if w and not w.replay:
            await self._deliver(w, int(message["seq"]), message["event"], message.get("ts"))

    async def run_done(self, message):
        w = self.watches.get(message["run_id"])
        if w and not w.replay:
            await self._finish(w, {"type": "done", "run_id": w.run_id, "status": message["status"],
                                   "summary": message.get("summary") or {}}, message.get("n_events"))

    async def run_error(self, message):
        w = self.watches.get(message["run_id"])
        if w and not w.replay:
            await self._finish(w, {"type": "error", "run_id": w.run_id, "code": message["code"],
                                   "message": message["message"]}, message.get("n_events"))

    async def run_started(self, message):
        w = self.watches.get(message["run_id"])
        if w:
            w.queued = False
            w.last_activity = time.monotonic()

    # --- replay and watchdog ----------------------------------------------------------------

    async def _replay(self, w: Watch) -> None:
        """Serve a run from the stored events of an identical finished run, paced like it."""
        try:
            source = await _get_run(w.source_id)
            events = await _events_between(w.source_id, w.last_seq)
            speed = float(conf.get("DEMO_REPLAY_SPEED")) or 1.0
            prev_t = None
            for seq, t, event in events:
                if prev_t is not None and t > prev_t:
                    await asyncio.sleep(min((t - prev_t) / speed, 5.0))
                prev_t = t
                await self._deliver(w, seq, event)
            summary = dict(source.summary or {})
            summary["replayed"] = True
            await _set_status(w.run_id, Run.Status.DONE, only_if=ACTIVE, summary=summary,
                              n_events=source.n_events)
            await self._finish(w, {"type": "done", "run_id": w.run_id, "status": "done", "summary": summary,
                                   "replayed_from": w.source_id})
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001
            log.exception("replay of %s failed", w.source_id)
            await _set_status(w.run_id, Run.Status.ERROR, only_if=ACTIVE, error_code="replay_failed")
            await self._finish(w, {"type": "error", "run_id": w.run_id, "code": "replay_failed",
                                   "message": "replaying the stored run failed"})

    async def _watchdog(self) -> None:
        """Never a silent hang: a quiet run is checked against the database and its heartbeat."""
        stall = float(conf.get("DEMO_STALL_SECONDS"))
        queue_timeout = float(conf.get("DEMO_QUEUE_TIMEOUT"))
        while True:
            await asyncio.sleep(min(1.0, stall / 2))
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
                try:
                    await self._check_quiet_run(w, queue_timeout)
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001
                    log.exception("watchdog check of run %s failed", w.run_id)

    async def _check_quiet_run(self, w: Watch, queue_timeout: float) -> None:
        run = await _get_run(w.run_id)
        if run is None:
            await self._finish(w, {"type": "error", "run_id": w.run_id, "code": "not_found",
                                   "message": "the run disappeared"})
            return
        if run.is_final:  # its final message was lost (e.g. the socket resubscribed late)
            await self._finish(w, self._final_frame(run))
            return
        if run.status == Run.Status.RUNNING:
            if await async_redis().exists(heartbeat_key(w.run_id)):
                w.hb_missing_since = None
                # Alive but quiet here: catch up from storage in case live messages went missing.
                async with w.lock:
                    if not w.finished:
                        await self._send_stored(w)
                return
            # Missing on two checks a second apart: not a race with the worker finishing.
            now = time.monotonic()
            if w.hb_missing_since is None or now - w.hb_missing_since < 1.0:
                w.hb_missing_since = w.hb_missing_since or now
                return
            msg = "the worker running this demo stopped responding"
            if await _set_status(w.run_id, Run.Status.ERROR, only_if=ACTIVE,
                                 error_code="worker_lost", error_message=msg):
                await self._finish(w, {"type": "error", "run_id": w.run_id, "code": "worker_lost",
                                       "message": msg})
            else:
                await self._finish(w, self._final_frame(await _get_run(w.run_id)))
            return
        if run.status == Run.Status.QUEUED and time.time() - run.created_at.timestamp() > queue_timeout:
            await async_redis().set(cancel_key(w.run_id), "queue_timeout", ex=3600)
            msg = "no worker picked up the run in time; try again later"
            if await _set_status(w.run_id, Run.Status.ERROR, only_if=(Run.Status.QUEUED,),
                                 error_code="queue_timeout", error_message=msg):
                await self._finish(w, {"type": "error", "run_id": w.run_id, "code": "queue_timeout",
                                       "message": msg})


def _enqueue(run_id: str) -> None:
    from inferencelab.celery import app  # the configured app, not whatever app is "current"

    app.send_task("workers.tasks.run_demo", args=[run_id], queue=GPU_QUEUE, task_id=run_id)


class DashboardConsumer(AsyncWebsocketConsumer):
    """Streams engine stats: per-worker batch (concurrent sequences), tokens/s, runs, queue length."""

    async def connect(self):
        await self.accept()
        self.task = asyncio.create_task(self._loop())

    async def disconnect(self, code):
        task = getattr(self, "task", None)
        if task:
            task.cancel()

    async def receive(self, text_data=None, bytes_data=None):
        await self.send(text_data=json.dumps({"type": "error", "code": "read_only",
                                              "message": "the dashboard socket only streams stats"}))

    async def _loop(self):
        interval = float(conf.get("DEMO_STATS_INTERVAL"))
        while True:
            try:
                await self.send(text_data=json.dumps(await collect_stats()))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                log.warning("dashboard stats failed: %s", exc)
                await self.send(text_data=json.dumps({"type": "error", "code": "stats_unavailable",
                                                      "message": str(exc)[:200]}))
            await asyncio.sleep(interval)


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
    queue = {GPU_QUEUE: await r.llen(GPU_QUEUE), CPU_QUEUE: await r.llen(CPU_QUEUE)}

    def counts():
        since = timezone.now() - timedelta(hours=1)
        recent = Run.objects.filter(created_at__gte=since)
        out = {s: 0 for s in Run.Status.values}
        for status, n in (recent.filter(replay_of__isnull=True).values_list("status")
                          .order_by().annotate(n=Count("id"))):
            out[status] = n
        out["replayed"] = recent.filter(replay_of__isnull=False).count()  # served without a worker
        return out

    return {"type": "stats", "t": time.time(), "workers": workers, "queue": queue,
            "runs_last_hour": await database_sync_to_async(counts)()}
