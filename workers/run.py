"""One run's sync side on the worker: claim it, advance its runner, persist every event, record its end.
Always used from one thread (the task's)."""
from __future__ import annotations

import contextlib
import logging
import time

from django.conf import settings
from django.utils import timezone

from demos.models import Run, RunEvent
from demos.registry import get_spec
from demos.runstate import cancel_key, detach_key, sync_redis, watchers_key
from openai_api.runner import API_DEMO, run_completion

from .engine import ENGINE, get_engine
from .heartbeat import CancelCheck, owner_gone
from .stats import STATS, WORKER_NAME
from .turns import turns

log = logging.getLogger(__name__)


def claim(run_id: str) -> Run | None:
    """Queued → running, exactly once (a redelivered or cancelled task finds it no longer queued). Records the
    device and dtype the run's numbers are measured on (an engine that fails to load is reported by the run).

    A run whose every socket went away longer than DEMO_ORPHAN_GRACE ago (nobody can be watching or resume it in
    time: its owner left, or its server died) is dropped, cancelled with `client_gone`, instead of computed."""
    if owner_gone(run_id):
        summary = {"finish_reason": "cancelled", "cancel_reason": "client_gone", "n_generated": 0}
        if Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(  # `worker`: who dropped it
                status=Run.Status.CANCELLED, summary=summary, worker=WORKER_NAME, finished_at=timezone.now()):
            log.info("run %s: nobody watches it any more; dropped from the queue, not computed", run_id)
            clear_flags(run_id)
        return None
    try:
        engine = get_engine()
        where = {"device": str(engine.device)[:32], "dtype": engine.dtype_name[:32]}
    except Exception:  # noqa: BLE001 - the run's first step fails with the real error
        where = {}
    claimed = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
        status=Run.Status.RUNNING, worker=WORKER_NAME, started_at=timezone.now(), **where
    )
    if not claimed:
        log.info("run %s is not queued any more; skipping", run_id)
        return None
    return Run.objects.get(pk=run_id)


class RunState:
    """The sync side of one run: advance the engine, persist, account."""

    STATUS_CHECK_INTERVAL = 1.0  # how often a step reads the run's state from the database

    def __init__(self, run: Run):
        self.run = run
        self.seq = 0
        self.t0 = time.monotonic()
        self.gen = None
        self.finished_event: dict | None = None
        self.n_tokens = 0
        self.check = CancelCheck(str(run.id))
        self.engine = None
        self.status_checked = time.monotonic()
        with STATS.lock:
            STATS.active += 1
            STATS.runs_total += 1
        self._accounted = True

    def _start(self):
        self.engine = get_engine()
        # An API request (openai_api) is no demo: its runner only streams tokens from the batching service.
        runner = run_completion if self.run.demo == API_DEMO else get_spec(self.run.demo).load_runner()
        self.gen = runner({**self.run.params, "model": settings.ENGINE_MODEL}, self.check, models=ENGINE.models)
        self.t0 = time.monotonic()

    def still_running(self) -> bool:
        """Whether the database still says running (at most once per STATUS_CHECK_INTERVAL). A worker that was
        stopped or cut off past the heartbeat grace finds its run failed (`worker_lost`) and stops computing it."""
        now = time.monotonic()
        if now - self.status_checked < self.STATUS_CHECK_INTERVAL:
            return True
        self.status_checked = now
        if Run.objects.filter(pk=self.run.id, status=Run.Status.RUNNING).exists():
            return True
        log.warning("run %s was ended elsewhere (its worker presumed lost); stopping it", self.run.id)
        self.check.reason = "ended_elsewhere"  # what the engine's should_stop now answers
        return False

    def step(self) -> tuple[int, dict] | None:
        if not self.still_running():
            return None
        if self.gen is None:
            self._start()
        # The engine is not thread-safe: steps of concurrent direct runs interleave under its lock. A run
        # served by the batching service must not hold it while it waits for its token, or concurrent
        # students' requests would reach the service one at a time instead of sharing forward passes. Direct runs
        # take the lock in the order they asked (turns.py: a plain lock lets a run be passed over).
        needs_lock = getattr(self.gen, "needs_engine_lock", True)
        lock = turns(self.engine.lock) if needs_lock else contextlib.nullcontext()
        with lock:
            try:
                event = next(self.gen)
            except StopIteration:
                return None
        seq = self.seq
        RunEvent.objects.create(run_id=self.run.id, seq=seq, t=time.monotonic() - self.t0,
                                type=str(event.get("type", ""))[:32], event=event)
        self.seq += 1
        if event.get("type") == "token":
            self.n_tokens += 1
            STATS.token()
        elif event.get("type") == "run_finished":
            self.finished_event = event
        return seq, event

    def close(self):
        if self.gen is not None:
            with turns(self.engine.lock):
                self.gen.close()  # GeneratorExit inside the engine: its resources are released now
        if self._accounted:
            with STATS.lock:
                STATS.active -= 1
            self._accounted = False

    def finish(self) -> tuple[str, dict] | None:
        """Record the run's end: (status, summary), or None when it had already been ended elsewhere (timed out,
        or failed as `worker_lost` while this worker was stopped), which keeps the final state its client got."""
        ev = self.finished_event or {}
        summary = {k: v for k, v in ev.items() if k not in ("type", "schema_version", "token_ids")}
        cancelled = ev.get("finish_reason") == "cancelled" or (not ev and self.check.reason is not None)
        if cancelled:
            summary.setdefault("n_generated", self.n_tokens)
            summary["finish_reason"] = "cancelled"
            summary["cancel_reason"] = self.check.reason or "user"
        summary["worker"] = WORKER_NAME
        status = Run.Status.CANCELLED if cancelled else Run.Status.DONE
        ended_here = Run.objects.filter(pk=self.run.id, status=Run.Status.RUNNING).update(
            status=status, summary=summary, n_events=self.seq, finished_at=timezone.now())
        clear_flags(str(self.run.id))
        if not ended_here:
            log.warning("run %s was already ended elsewhere; keeping its final state", self.run.id)
            return None
        return status, summary

    def fail(self, code: str, message: str):
        with STATS.lock:
            STATS.runs_failed += 1
        Run.objects.filter(pk=self.run.id, status=Run.Status.RUNNING).update(
            status=Run.Status.ERROR, error_code=code, error_message=message, n_events=self.seq,
            finished_at=timezone.now(),
        )
        clear_flags(str(self.run.id))


def clear_flags(run_id: str) -> None:
    try:
        sync_redis().delete(cancel_key(run_id), detach_key(run_id), watchers_key(run_id))
    except Exception:  # noqa: BLE001
        pass
