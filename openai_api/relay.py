"""From a validated request to the worker and back: the request becomes a Run admitted by the demos' limits
(demos.admission: per-person share, the address ceiling, the queue cap) and queued fairly; its events come back
through the run's Channels group (the database fills any gap, as a resumed demo socket's does)."""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from demos.admission import Refused, admit, enqueue
from demos.consumers.common import events_between, get_run, set_status
from demos.models import Run
from demos.runstate import async_redis, attach, cancel_key, detach, redis_retry, run_group
from demos.versions import engine_version

from .errors import ApiError
from .params import Completion
from .runner import API_DEMO

log = logging.getLogger(__name__)
QUIET_CHECK_S = 2.0  # no message this long: read the run's state from the database (and keep the stream alive)
_CLEANUPS: set[asyncio.Task] = set()  # cleanups of abandoned requests, running past their request's cancellation


async def submit(completion: Completion, user, address: str) -> Run:
    """Create the request's Run if the limits allow it (ApiError 429/503 otherwise)."""
    version = await sync_to_async(engine_version, thread_sensitive=False)()
    owner = f"u:{user.pk}"  # the person, as demos.identity names a signed-in user: one share for demos and API

    def create() -> Run:
        return Run.objects.create(
            demo=API_DEMO, params=completion.run_params(), owner=owner, client=address[:64], user=user,
            model=settings.ENGINE_MODEL, engine_version=version, deterministic=completion.deterministic,
            status=Run.Status.QUEUED)

    try:
        return await admit((owner,), address, create)
    except Refused as refused:
        status = 503 if refused.code == "busy" else 429
        raise ApiError(status, refused.message, type="requests" if status == 429 else "server_error",
                       code="rate_limit_exceeded" if status == 429 else "server_busy",
                       retry_after=refused.retry_after) from None


class RunEvents:
    """The run's trace events in order (dicts), then a last item {"type": "end", "status", "error"?}. Also yields
    None after each quiet QUIET_CHECK_S, so a stream can send a keep-alive. `close()` always: it leaves the group,
    and cancels a run nobody will read any more."""

    def __init__(self, run: Run) -> None:
        self.run_id = str(run.id)
        self.owner = run.owner
        self.layer = get_channel_layer()
        self.channel: str | None = None
        self.last_seq = -1
        self.ended = False
        self.cancel_reason = "client_gone"  # why a run left before its end is cancelled ("stop_sequence": cut)

    async def start(self) -> None:
        """Join the run's group before queueing it, so no event is published before anyone listens."""
        self.channel = await self.layer.new_channel("openai.")
        await redis_retry(self.layer.group_add, run_group(self.run_id), self.channel)
        await redis_retry(attach, self.run_id, self.channel)
        await sync_to_async(enqueue, thread_sensitive=False)(self.run_id, self.owner)

    async def _stored(self, upto: int | None = None) -> list[dict]:
        rows = await events_between(self.run_id, self.last_seq, upto)
        if rows:
            self.last_seq = rows[-1][0]
        return [event for _, _, event in rows]

    async def _final(self) -> dict | None:
        run = await get_run(self.run_id)
        if run is None or not run.is_final:
            return None
        return {"type": "end", "status": run.status, "code": run.error_code or None,
                "error": run.error_message or None}

    async def events(self) -> AsyncIterator[dict | None]:
        receiving: asyncio.Task | None = None
        try:
            while True:
                if receiving is None:  # one receive at a time, never cancelled mid-wait (that unsubscribes)
                    receiving = asyncio.ensure_future(self.layer.receive(self.channel))
                done, _ = await asyncio.wait({receiving}, timeout=QUIET_CHECK_S)
                if not done:  # quiet: a message may have been lost, or the run ended without one reaching us
                    for event in await self._stored():
                        yield event
                    end = await self._final()
                    if end is not None:
                        for event in await self._stored():
                            yield event
                        self.ended = True
                        yield end
                        return
                    yield None
                    continue
                message, receiving = receiving.result(), None
                kind = message.get("type")
                if kind == "run.event" and isinstance(message.get("seq"), int):
                    if message["seq"] <= self.last_seq:
                        continue
                    for event in await self._stored(message["seq"] - 1):  # a gap: read it back
                        yield event
                    self.last_seq = message["seq"]
                    yield message["event"]
                elif kind in ("run.done", "run.error"):
                    for event in await self._stored():
                        yield event
                    self.ended = True
                    failed = kind == "run.error"
                    yield {"type": "end", "status": Run.Status.ERROR if failed else message.get("status"),
                           "code": message.get("code") if failed else None,
                           "error": message.get("message") if failed else None}
                    return
        finally:
            if receiving is not None:
                receiving.cancel()

    async def close(self) -> None:
        """Leave the run's group; a run not ended (the client went away) is cancelled. Runs as its own task, so a
        request's cancellation (Django cancels a view whose client disconnected) cannot stop it halfway."""
        task = asyncio.ensure_future(self._close())
        _CLEANUPS.add(task)
        task.add_done_callback(_CLEANUPS.discard)
        await asyncio.shield(task)

    async def _close(self) -> None:
        try:
            if not self.ended:
                await async_redis().set(cancel_key(self.run_id), self.cancel_reason, ex=3600)
                await set_status(self.run_id, Run.Status.CANCELLED, only_if=(Run.Status.QUEUED,),
                                 summary={"finish_reason": "cancelled", "cancel_reason": self.cancel_reason,
                                          "n_generated": 0})
            if self.channel is not None:
                await self.layer.group_discard(run_group(self.run_id), self.channel)
                if not self.ended:  # an ended run's watchers were cleared by its worker
                    await detach(self.run_id, self.channel, time.time())
        except Exception:  # noqa: BLE001 - the worker's own checks (cancel flag, watchers) still end the run
            log.exception("cleaning up API run %s", self.run_id)
