"""The worker's Celery tasks. `run_demo` (queue DEMO_TASK_QUEUE, `gpu` by default) runs one demo run on this
worker's engine; the narration tasks (queue `cpu`) are in workers/narration.py.

The engine is loaded once per worker process (workers.engine, also warmed when the worker starts: workers.startup)
and shared by the task threads; steps of concurrent runs interleave under the engine's lock.
Each run is one `async_to_sync` call, so one event loop (and one channel-layer connection)
serves all of its events. Every event is persisted (RunEvent) before it is published to the
run's Channels group, which is what lets a consumer resume without gaps or duplicates.
"""
from __future__ import annotations

import logging
import time

from asgiref.sync import async_to_sync, sync_to_async
from celery import shared_task
from channels.layers import get_channel_layer
from django.db import close_old_connections

from demos.admission import RUN_DEMO_TASK, next_run
from demos.models import Run
from demos.runstate import run_group

# Imported with this module (Celery autodiscovers workers.tasks): the narration tasks, the LTI score job and its
# sweep (scores), and the worker_ready receivers that warm the engine and measure the machine.
from . import machine_profile, narration, scores, startup  # noqa: F401
from .heartbeat import Heartbeat
from .run import RunState, claim
from .stats import STATS, WORKER_NAME

log = logging.getLogger(__name__)


@shared_task(bind=True, name=RUN_DEMO_TASK, acks_late=True, ignore_result=True)  # routed to DEMO_TASK_QUEUE
def run_demo(self, ticket: str) -> str:
    """Run the next queued run in fair order (demos.admission.next_run: the client address with the fewest running
    runs first) to completion.

    The task's argument is the run that sent this ticket; it runs itself only when the fair lists are
    empty (they were lost, e.g. a Redis without persistence restarted). Returns the final status."""
    close_old_connections()
    # The fair lists of the queue this ticket came through: a run only ever lands on a worker of its route.
    queue = (self.request.delivery_info or {}).get("routing_key") or None
    try:
        for _ in range(100):  # skip runs cancelled while they waited: the next fair run gets this slot
            run_id = next_run(queue)
            if run_id is None:
                return async_to_sync(_run_demo)(str(ticket))  # "skipped" when it is not queued any more
            log.info("ticket %s takes run %s (fair order)", ticket, run_id)
            status = async_to_sync(_run_demo)(run_id)
            if status != "skipped":
                return status
        return "skipped"
    finally:
        close_old_connections()


async def _run_demo(run_id: str) -> str:
    layer = get_channel_layer()
    group = run_group(run_id)

    async def publish(message: dict) -> None:
        try:
            await layer.group_send(group, message)
        except Exception:  # noqa: BLE001 - the event is stored; a consumer can recover it from the DB
            log.exception("publishing to %s failed", group)

    STATS.start_reporter()
    # The heartbeat exists before the run is marked running, so a consumer never sees a running
    # run without one (which it would take for a dead worker).
    with Heartbeat(run_id):
        run = await sync_to_async(claim)(run_id)
        if run is None:
            return "skipped"
        # The run's header (device, dtype, engine version, start time) reaches the client before its first event.
        await publish({"type": "run.started", "run_id": run_id, "worker": WORKER_NAME, "header": run.header()})
        state = RunState(run)
        try:
            while True:
                item = await sync_to_async(state.step)()  # runs in this task's thread
                if item is None:
                    break
                seq, event = item
                await publish({"type": "run.event", "run_id": run_id, "seq": seq, "event": event,
                               "ts": time.time()})  # publish time, for worker→client latency
        except Exception as exc:  # noqa: BLE001 - report any engine failure to the user
            log.exception("run %s failed", run_id)
            code, message = "engine_error", f"{type(exc).__name__}: {exc}"[:500]
            if isinstance(getattr(exc, "run_error_code", None), str):  # an error meant for the student as it is
                code, message = exc.run_error_code, str(exc)[:500]
            await sync_to_async(state.fail)(code, message)
            await publish({"type": "run.error", "run_id": run_id, "code": code, "message": message,
                           "n_events": state.seq})
            return Run.Status.ERROR
        finally:
            await sync_to_async(state.close)()
        ended = await sync_to_async(state.finish)()
        if ended is None:
            return "ended_elsewhere"
        status, summary = ended
        await publish({"type": "run.done", "run_id": run_id, "status": status, "summary": summary,
                       "n_events": state.seq})
        return status
