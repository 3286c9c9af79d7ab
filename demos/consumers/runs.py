"""Starting, resuming and cancelling runs (the `start`, `resume` and `cancel` actions); what may start is
demos.admission's call."""
from __future__ import annotations

import asyncio
import logging

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import timezone

from ..admission import Refused, admit, enqueue, replay_reason
from ..models import Run
from ..registry import is_deterministic, validate
from ..runstate import async_redis, attach, cancel_key, redis_retry, run_group
from .common import ACTIVE, ProtocolError, Watch, get_run, set_status
from ..versions import engine_version
from .replay import cache_key_for, replay_source

log = logging.getLogger(__name__)


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
        # true) or, for a deterministic run, when no worker slot is free (docs/protocol.md; admission.replay_reason).
        source = None
        reason = await replay_reason(live=live, wants_replay=wants_replay, deterministic=deterministic)
        if reason:
            source = await database_sync_to_async(replay_source)(demo, cleaned, key, self.owners)
        user = self.scope.get("user")

        def create() -> Run:
            return Run.objects.create(
                demo=demo, params=cleaned, owner=self.owner, client=self.client_addr[:64],
                user=user if getattr(user, "is_authenticated", False) else None,
                model=settings.ENGINE_MODEL, engine_version=version, cache_key=key, deterministic=deterministic,
                replay_of=source, replay_reason=reason if source else "",
                status=Run.Status.RUNNING if source else Run.Status.QUEUED,
                worker="replay" if source else "", started_at=timezone.now() if source else None,
            )

        try:
            run = await admit(self.owners, self.client_addr, create)
        except Refused as refused:
            raise ProtocolError(refused.code, refused.message, retry_after=refused.retry_after) from None
        run_id = str(run.id)
        w = Watch(run_id=run_id, source_id=str(source.id) if source else run_id, replay=bool(source))
        self._watch(w)
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
            await sync_to_async(enqueue, thread_sensitive=False)(run_id, run.owner)
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
        replay = bool(run.replay_of_id)
        w = Watch(run_id=run_id, source_id=str(run.replay_of_id or run.id), replay=replay, last_seq=after)
        self._watch(w)  # replaces (and stops) an earlier watch of the run on this socket
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
