"""The run socket `/ws/demos/`: frames, validation and delivery (docs/protocol.md).

Delivery guarantees for one run on one socket: every event exactly once, in seq order, then exactly one
final frame (`done` or `error`). The worker persists each event before publishing it, and the consumer joins
the run's group before reading stored events, so a resume (or any gap seen live) is filled from the database
and live duplicates are dropped by seq. Starting, limits and cancelling live in runs.py, replays in replay.py.
"""
from __future__ import annotations

import asyncio
import json
import logging
import math
import time
import uuid

import redis
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from courseapp.input_limits import InputTooComplex, loads
from inferencelab import client_address

from ..identity import owners_for_scope
from ..models import Run
from ..registry import DemoParamError
from ..runstate import REDIS_HEALTH, async_redis, cancel_key, detach, heartbeat_key, judge_heartbeat, run_group
from .common import (ACTIVE, ProtocolError, Watch, events_between, get_run, queue_position, redis_retry, set_status,
                     warmup_state)
from .replay import ReplayMixin
from .runs import RunsMixin

log = logging.getLogger(__name__)

ACTIONS = ("start", "resume", "cancel", "ping")


def has_lone_surrogate(value) -> bool:
    """JSON's \\ud800 escapes decode to text no database or browser can take: find them before anything does."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_lone_surrogate(v) for v in value)
    return False


class DemoConsumer(RunsMixin, ReplayMixin, AsyncWebsocketConsumer):
    groups: list[str] = []

    async def connect(self):
        self.client_addr = client_address.for_scope(self.scope)  # behind TRUSTED_PROXIES: the real one
        self.owners = await database_sync_to_async(owners_for_scope)(self.scope, self.client_addr)
        self.owner = self.owners[0]  # what new runs are stored under; resume and limits accept all of them
        self.watches: dict[str, Watch] = {}
        self.rate = settings.DEMO_MESSAGE_RATE
        self.tokens = self.burst = settings.DEMO_MESSAGE_BURST
        self.tokens_at = time.monotonic()
        await self.accept()
        self.watchdog = asyncio.create_task(self._watchdog())

    async def disconnect(self, code):
        wd = getattr(self, "watchdog", None)
        if wd:
            wd.cancel()
        for w in list(getattr(self, "watches", {}).values()):
            if w.task:
                w.task.cancel()
            if not w.finished and not w.replay:
                # Closed tab or lost network: if no other socket watches the run, the worker
                # cancels it after a grace period unless a resume comes first.
                try:
                    await redis_retry(detach, w.run_id, self.channel_name, time.time())
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
        try:  # bounded: a message nested 900 deep parsed, then broke has_lone_surrogate's recursion
            msg = loads(text_data, max_bytes=limit)
        except InputTooComplex as exc:
            raise ProtocolError("message_too_complex", f"the message is refused: {exc}")
        except ValueError:
            raise ProtocolError("invalid_json", "the message is not valid JSON")
        if not isinstance(msg, dict):
            raise ProtocolError("invalid_message", "the message must be a JSON object")
        if has_lone_surrogate(msg):
            raise ProtocolError("invalid_text", "the message contains an unpaired surrogate (an escape such as "
                                "\\ud800 without its pair): send valid Unicode text")
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

    # --- delivery ------------------------------------------------------------------------------

    async def _send_stored(self, w: Watch, upto: int | None = None) -> None:
        """Send stored events after w.last_seq (up to `upto`). Caller holds w.lock."""
        for seq, _t, event in await events_between(w.source_id, w.last_seq, upto):
            if seq != w.last_seq + 1:
                log.error("run %s: stored events have a gap at %s", w.source_id, w.last_seq + 1)
            await self._send({"type": "event", "run_id": w.run_id, "seq": seq, "event": event})
            w.last_seq = seq

    async def _report_queue(self, w: Watch, force: bool = False) -> None:
        """Send `queued` (position, estimate; while no demo worker is warm yet, what they are doing instead) while
        the run waits: on a change, else every 5 s."""
        info = await queue_position(w.run_id, fresh=force)
        warming = await warmup_state() if info is not None else None
        async with w.lock:
            if info is None or w.finished or w.last_seq >= 0:
                w.queued = False  # picked up (or over): its events say the rest
                return
            if warming is not None:
                info["warming"] = warming
            key = (info["position"], info["eta_s"], warming and warming["phase"])
            now = time.monotonic()
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

    def _final_frame(self, run: Run) -> dict:
        """The final frame of a finished run (reads the replay source from the database when there is one)."""
        if run.status == Run.Status.ERROR:
            return {"type": "error", "run_id": str(run.id), "code": run.error_code or "run_failed",
                    "message": run.error_message or "the run failed"}
        frame = {"type": "done", "run_id": str(run.id), "status": run.status, "summary": run.summary}
        if run.replay_of_id:
            frame["replayed_from"] = self._replay_label(run.replay_of)
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
            header = message.get("header")
            if isinstance(header, dict) and not w.replay and not w.finished:
                await self._send({**header, "type": "header", "run_id": w.run_id})

    # --- watchdog ----

    async def _watchdog(self) -> None:
        """Never a silent hang: a quiet run is checked against the database and its heartbeat."""
        stall = settings.DEMO_STALL_SECONDS
        queue_timeout = settings.DEMO_QUEUE_TIMEOUT
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
                if w.queued and time.time() - w.created < queue_timeout:
                    continue  # still in the queue view: nothing to ask the database until it could time out
                try:
                    await self._check_quiet_run(w, queue_timeout)
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001
                    log.exception("watchdog check of run %s failed", w.run_id)

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


class NotFoundConsumer(AsyncWebsocketConsumer):
    """Any other websocket path: refused cleanly (close 4404) instead of a routing error and a traceback."""

    async def connect(self):
        await self.close(code=4404)
