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

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from courseapp.input_limits import InputTooComplex, loads
from inferencelab import client_address

from ..identity import owners_for_scope
from ..models import Run
from ..registry import DemoParamError
from ..runstate import detach, run_group
from .common import ProtocolError, Watch, events_between, queue_position, redis_retry, warmup_state
from .replay import ReplayMixin
from .runs import RunsMixin
from .sockets import hub
from .watchdog import WatchdogMixin

log = logging.getLogger(__name__)

ACTIONS = ("start", "resume", "cancel", "ping")
CLOSE_TOO_MANY_SOCKETS = 4429  # docs/protocol.md: over DEMO_SOCKETS_PER_VISITOR or DEMO_SOCKETS_PER_ADDRESS
RELEASE_TIMEOUT = 5.0  # seconds a dropped consumer may spend letting go of its runs in Redis and its groups


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


class DemoConsumer(WatchdogMixin, RunsMixin, ReplayMixin, AsyncWebsocketConsumer):
    groups: list[str] = []

    async def __call__(self, scope, receive, send):
        """The whole life of one socket. Whatever it holds (its deadline, its tick and replay tasks, its place in
        the socket counts, its runs' watchers and groups) is let go here as well as in `disconnect`: Daphne
        cancels an application that has not finished within its close timeout after the client went away (a
        consumer still busy in a handler never sees `websocket.disconnect`), and then only this `finally` runs."""
        self.watches: dict[str, Watch] = {}
        self.used_at = time.monotonic()
        self._hub = hub()
        self._counted: tuple[str, str] | None = None
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()
            if self.watches:
                try:
                    await asyncio.wait_for(self._let_go_of_runs(), RELEASE_TIMEOUT)
                except BaseException:  # noqa: BLE001 - cancelled again, or Redis down: the orphan grace covers it
                    log.warning("a dropped socket could not let go of its runs", exc_info=True)

    async def connect(self):
        self.client_addr = client_address.for_scope(self.scope)  # behind TRUSTED_PROXIES: the real one
        self.owners = await database_sync_to_async(owners_for_scope)(self.scope, self.client_addr)
        self.owner = self.owners[0]  # what new runs are stored under; resume and limits accept all of them
        self.rate = settings.DEMO_MESSAGE_RATE
        self.tokens = self.burst = settings.DEMO_MESSAGE_BURST
        self.tokens_at = time.monotonic()
        await self.accept()
        # Accepted first, then refused with a frame and a close code: a refused handshake reaches a browser's
        # script as a bare 1006 with no reason.
        per_visitor, per_address = settings.DEMO_SOCKETS_PER_VISITOR, settings.DEMO_SOCKETS_PER_ADDRESS
        over = self._hub.join(self.owner, self.client_addr, per_visitor, per_address)
        if over is not None:
            where = (f"{per_visitor} demo connections per visitor" if over == "owner"
                     else f"{per_address} demo connections per network address")
            await self._send({"type": "error", "code": "too_many_sockets", "retry_after": 30,
                              "message": f"At most {where}: close another tab first."})
            await self.close(code=CLOSE_TOO_MANY_SOCKETS)
            return
        self._counted = (self.owner, self.client_addr)
        self.used_at = time.monotonic()
        self._arm()

    async def disconnect(self, code):
        self._release()
        await self._let_go_of_runs()

    def _release(self) -> None:
        """The synchronous part of letting go (it cannot fail half-way, and runs even in a cancelled task):
        the deadline, the tasks, the socket counts."""
        self._stop_timer()
        for w in self.watches.values():
            if w.task:
                w.task.cancel()
        if self._counted is not None:
            self._hub.leave(*self._counted)
            self._counted = None

    async def _let_go_of_runs(self) -> None:
        for w in list(self.watches.values()):
            if not w.finished and not w.replay:
                # Closed tab or lost network: if no other socket watches the run, the worker
                # cancels it after a grace period unless a resume comes first.
                try:
                    await redis_retry(detach, w.run_id, self.channel_name, time.time())
                except Exception:  # noqa: BLE001
                    log.exception("could not mark run %s detached", w.run_id)
            await self.channel_layer.group_discard(run_group(w.run_id), self.channel_name)
            self.watches.pop(w.run_id, None)

    def _watch(self, w: Watch) -> None:
        """Follow a run on this socket (a new watch replaces an older one of the same run)."""
        old = self.watches.get(w.run_id)
        if old is not None and old.task:
            old.task.cancel()
        self.watches[w.run_id] = w
        self._arm()

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
        if self._counted is None:
            return  # refused (too many sockets) or closed for idleness: its close is on the way, nothing more runs
        self._ref = None  # a client's optional "ref" is echoed on the reply (accepted or error)
        try:
            msg = self._parse(text_data, bytes_data)
            ref = msg.get("ref")
            self._ref = ref if isinstance(ref, str) and len(ref) <= 64 else None
            action = msg["action"]
            if action != "ping":  # a page's keep-alive ping is not use: an open, unused tab may be closed
                self.used_at = time.monotonic()
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
        self.used_at = time.monotonic()  # idle from the end of its last run, not from the message that started it
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


class NotFoundConsumer(AsyncWebsocketConsumer):
    """Any other websocket path: refused cleanly (close 4404) instead of a routing error and a traceback."""

    async def connect(self):
        await self.close(code=4404)
