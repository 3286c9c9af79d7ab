"""The demos' Celery task. `run_demo` (queue `gpu`) runs one demo run on this worker's engine.

The engine is loaded once per worker process (`get_engine`, also warmed when the worker starts)
and shared by the task threads; steps of concurrent runs interleave under the engine's lock.
Each run is one `async_to_sync` call, so one event loop (and one channel-layer connection)
serves all of its events. Every event is persisted (RunEvent) before it is published to the
run's Channels group, which is what lets a consumer resume without gaps or duplicates.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections import Counter

import redis
from asgiref.sync import async_to_sync, sync_to_async
from celery import shared_task
from celery.signals import worker_ready, worker_shutting_down
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from . import conf
from .models import Run, RunEvent
from .registry import get_spec
from .runstate import (CPU_QUEUE, cancel_key, detach_key, fair_pop, heartbeat_key, run_group, sync_redis,
                       unwatched_for, watchers_key, worker_key)

log = logging.getLogger(__name__)

WORKER_NAME = f"{socket.gethostname()}:{os.getpid()}"

# --- the engine, once per process -------------------------------------------------------------

_engine_lock = threading.Lock()
_engine = None


def _kernel(engine) -> str:
    """The path a decode step of the worker's engine takes: the fused CPU step, a CUDA graph, or the reference."""
    from inference_core.kernels.cuda_graphs import graphs_enabled
    from inference_core.engine.model_runner import runner_for

    if graphs_enabled(engine.model, engine.device):
        return "cuda graph"
    return runner_for(engine.model).kernel


def get_engine():
    """The process's engine, loaded on first use (thread-safe: concurrent first calls load once)."""
    global _engine
    if _engine is None:
        with _engine_lock:
            if _engine is None:
                from inference_core import load_engine

                t0 = time.perf_counter()
                _engine = load_engine(settings.ENGINE_MODEL)
                log.info("engine %s loaded on %s in %.1fs", settings.ENGINE_MODEL, _engine.device,
                         time.perf_counter() - t0)
    return _engine


# --- per-process stats for the dashboard ------------------------------------------------------


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.active = 0
        self.runs_total = 0
        self.runs_failed = 0
        self.tokens_total = 0
        self.token_times: list[float] = []  # monotonic times of recent tokens (last 10 s)
        self.started = time.time()
        self.slots = 0  # this worker's task slots (its -c), reported so a start knows whether one is free
        # Warm-up (see `_warm_up`): the phase now and since when. The worker takes runs only once `ready`.
        self.phase = "starting"
        self.phase_since = time.time()
        self.warmup_started = time.time()
        self._thread = None

    def enter_phase(self, phase: str) -> None:
        """Start a warm-up phase (`kernels`, `loading`, `first_decode`, `ready`) and publish it at once."""
        with self.lock:
            self.phase, self.phase_since = phase, time.time()
        self.publish()

    @property
    def ready(self) -> bool:
        return self.phase == "ready"

    def idle_token(self) -> int | None:
        """None while the worker warms up or runs anything; else a token that changes whenever a run starts, so
        equal tokens before and after a measurement mean the worker was idle throughout."""
        with self.lock:
            return None if self.phase != "ready" or self.active else self.runs_total  # counted as a run starts


    def token(self):
        now = time.monotonic()
        with self.lock:
            self.tokens_total += 1
            self.token_times.append(now)
            if len(self.token_times) > 4096:
                del self.token_times[:2048]

    def snapshot(self) -> dict:
        now = time.monotonic()
        with self.lock:
            self.token_times = [t for t in self.token_times if now - t <= 10.0]
            recent = len(self.token_times)
            window = min(10.0, max(1.0, now - self.token_times[0])) if recent else 10.0
            # During the warm-up the engine's runner may be building its kernels (behind a file lock another
            # process can hold): the stats must not wait for it, or the published phase would expire.
            engine = _engine if self.phase == "ready" else None
            from inference_core.engine.model_runner import runner_for
            from inference_core.engine.serving import existing_service

            service = existing_service(settings.ENGINE_MODEL)
            batch = service.stats if service is not None else None
            return {
                "name": WORKER_NAME,
                "pid": os.getpid(),
                "model": settings.ENGINE_MODEL,
                "device": str(engine.device) if engine is not None else None,
                "dtype": engine.dtype_name if engine is not None else None,
                "kernel": _kernel(engine) if engine is not None else None,  # what a decode step runs
                # forwards per path the engine's runner took (cpu-fused-step, cuda graph paged decode, torch
                # reference): on a GPU the graph replays are the dashboard's "graph hits"
                "steps_by_path": dict(runner_for(engine.model).path_counts) if engine is not None else {},
                "slots": self.slots,
                "engine_loaded": _engine is not None,
                # Warm-up: `ready` once the engine has loaded and decoded once (the worker takes runs only
                # then); until then `phase` says what it is doing and `warmup_started` since when.
                "ready": self.phase == "ready",
                "phase": self.phase,
                "phase_since": self.phase_since,
                "warmup_started": self.warmup_started,
                # The continuous batch of the engine's batching service (cached generation): how many
                # sequences shared the last forward, and what waits for a slot or KV blocks.
                "batch_size": batch.running if batch else 0,
                "max_batch_size": batch.max_batch_size if batch else 0,
                "waiting": batch.waiting if batch else 0,
                "kv_blocks_used": batch.blocks_used if batch else 0,
                "kv_blocks_total": batch.blocks_total if batch else 0,
                "tokens_per_s": round(recent / window, 2) if recent else 0.0,
                "tokens_total": self.tokens_total,
                "runs_total": self.runs_total,
                "runs_failed": self.runs_failed,
                "runs_active": self.active,
                "uptime_s": round(time.time() - self.started, 1),
                "updated": time.time(),
            }

    def publish(self):
        interval = float(conf.get("DEMO_STATS_INTERVAL"))
        try:
            sync_redis().set(worker_key(WORKER_NAME), json.dumps(self.snapshot()), ex=max(5, int(interval * 5)))
        except Exception as exc:  # noqa: BLE001 - stats are best effort
            log.debug("stats publish failed: %s", exc)

    def start_reporter(self):
        if self._thread is not None:
            return

        def loop():
            interval = float(conf.get("DEMO_STATS_INTERVAL"))
            while True:
                self.publish()
                time.sleep(interval)

        self._thread = threading.Thread(target=loop, name="demo-stats", daemon=True)
        self._thread.start()


STATS = Stats()


def runs_demos(consumer) -> bool:
    """A worker that consumes any queue besides `cpu` takes demo runs (and loads the engine at start)."""
    try:
        return bool(set(consumer.app.amqp.queues.consume_from) - {CPU_QUEUE})
    except Exception:  # noqa: BLE001 - unknown: assume it does
        return True


def _concurrency(consumer) -> int:
    """The worker's task slots (`-c`), 0 when unknown (then a start assumes the default of 16)."""
    for get in (lambda: consumer.controller.concurrency, lambda: consumer.pool.limit):
        try:
            value = int(get())
            if value > 0:
                return value
        except Exception:  # noqa: BLE001
            continue
    return 0


@worker_ready.connect
def _warm_up(sender=None, **kwargs):
    """Build (or load) the native kernels, load the engine and decode once, publishing each phase, before the
    worker consumes its first run: Celery sends `worker_ready` from the consumer before its event loop starts,
    so no run waits on a half-warm engine, and the queued frames can say what the worker is doing meanwhile."""
    if sender is not None and not runs_demos(sender):
        return  # a `cpu`-only worker never runs the engine
    from inference_core.engine.machine_profile import warm_up
    from inference_core.kernels import quant_kernels

    STATS.slots = _concurrency(sender)
    STATS.warmup_started = time.time()
    STATS.start_reporter()
    try:
        STATS.enter_phase("kernels")
        quant_kernels.load()  # built by `make run`/`make test` beforehand; compiled here only when they were not
        STATS.enter_phase("loading")
        engine = get_engine()
        STATS.enter_phase("first_decode")
        seconds = warm_up(engine)
        log.info("engine warm: first decode %.1f s, %.1f s since the worker started", seconds,
                 time.time() - STATS.warmup_started)
    except Exception:  # noqa: BLE001 - a run will report it to the user; keep the worker up
        log.exception("engine warm-up failed")
    STATS.enter_phase("ready")


@worker_shutting_down.connect
def _forget_worker(sender=None, **kwargs):
    try:
        sync_redis().delete(worker_key(WORKER_NAME))
    except Exception:  # noqa: BLE001
        pass


# --- the task ---------------------------------------------------------------------------------


class Heartbeat:
    """Refreshes the run's heartbeat key from a thread, so a long step or the model load still counts."""

    def __init__(self, run_id: str):
        self.key = heartbeat_key(run_id)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=f"hb-{run_id[:8]}", daemon=True)

    def _loop(self):
        interval = float(conf.get("DEMO_HEARTBEAT_INTERVAL"))
        ttl_ms = int(float(conf.get("DEMO_HEARTBEAT_TTL")) * 1000)
        r = sync_redis()
        while not self.stop.is_set():
            try:
                r.set(self.key, WORKER_NAME, px=ttl_ms)
            except Exception as exc:  # noqa: BLE001
                log.warning("heartbeat failed: %s", exc)
            self.stop.wait(interval)

    def __enter__(self):
        sync_redis().set(self.key, WORKER_NAME, px=int(float(conf.get("DEMO_HEARTBEAT_TTL")) * 1000))
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=2)
        try:
            sync_redis().delete(self.key)
        except Exception:  # noqa: BLE001
            pass


class CancelCheck:
    """`should_stop` for the engine: a user cancel, a socket gone longer than the grace period, or the run ended
    elsewhere (failed by a server while this worker was stopped or cut off: `_RunState.still_running` says so)."""

    WATCH_CHECK_INTERVAL = 1.0  # the cancel flag is read before every step; who watches, at most this often

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.key = cancel_key(run_id)
        self.grace = float(conf.get("DEMO_ORPHAN_GRACE"))
        self.reason: str | None = None
        self.watch_checked = 0.0

    def __call__(self) -> bool:
        if self.reason:
            return True
        try:
            cancel = sync_redis().get(self.key)
            if cancel:
                self.reason = cancel.decode() or "user"
            elif time.monotonic() - self.watch_checked >= self.WATCH_CHECK_INTERVAL:
                self.watch_checked = time.monotonic()
                gone = unwatched_for(self.run_id)
                if gone is not None and gone > self.grace:
                    self.reason = "client_gone"
        except redis.exceptions.RedisError as exc:
            # Redis down or restarting: no flag can be read, so nobody asked to stop. Keep going (events
            # go to the database; a resumed client reads them); a cancel is seen once Redis is back.
            log.warning("run %s: cancel check skipped, Redis unavailable: %s", self.run_id, exc)
            return False
        return self.reason is not None


def _running_by_address(addresses: list[str]) -> dict[str, int]:
    rows = Run.objects.filter(status=Run.Status.RUNNING, client__in=addresses).values_list("client", flat=True)
    return dict(Counter(rows))


@shared_task(bind=True, name="demos.tasks.run_demo", acks_late=True, ignore_result=True)  # DEMO_TASK_QUEUE
def run_demo(self, ticket: str) -> str:
    """Run the next queued run in fair order (runstate.fair_push: the client address with the fewest running runs
    first) to completion.

    The task's argument is the run that sent this ticket; it runs itself only when the fair lists are
    empty (they were lost, e.g. a Redis without persistence restarted). Returns the final status."""
    close_old_connections()
    # The fair lists of the queue this ticket came through: a run only ever lands on a worker of its route.
    queue = (self.request.delivery_info or {}).get("routing_key") or None
    try:
        for _ in range(100):  # skip runs cancelled while they waited: the next fair run gets this slot
            run_id = fair_pop(_running_by_address, queue)
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
        run = await sync_to_async(_claim)(run_id)
        if run is None:
            return "skipped"
        # The run's header (device, dtype, engine version, start time) reaches the client before its first event.
        await publish({"type": "run.started", "run_id": run_id, "worker": WORKER_NAME, "header": run.header()})
        state = _RunState(run)
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


def _claim(run_id: str) -> Run | None:
    """Queued → running, exactly once (a redelivered or cancelled task finds it no longer queued). Records the
    device and dtype the run's numbers are measured on (an engine that fails to load is reported by the run).

    A run whose every socket went away longer than DEMO_ORPHAN_GRACE ago (nobody can be watching or resume it in
    time: its owner left, or its server died) is dropped, cancelled with `client_gone`, instead of computed."""
    if _owner_gone(run_id):
        summary = {"finish_reason": "cancelled", "cancel_reason": "client_gone", "n_generated": 0}
        if Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(  # `worker`: who dropped it
                status=Run.Status.CANCELLED, summary=summary, worker=WORKER_NAME, finished_at=timezone.now()):
            log.info("run %s: nobody watches it any more; dropped from the queue, not computed", run_id)
            _clear_flags(run_id)
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


def _owner_gone(run_id: str) -> bool:
    try:
        gone = unwatched_for(run_id)
    except redis.exceptions.RedisError:
        return False  # cannot tell: run it (a cancel is still seen between its steps)
    return gone is not None and gone > float(conf.get("DEMO_ORPHAN_GRACE"))


class _RunState:
    """The sync side of one run: advance the engine, persist, account. Always used from one thread."""

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
        runner = get_spec(self.run.demo).load_runner()
        self.gen = runner({**self.run.params, "model": settings.ENGINE_MODEL}, self.check)
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
        # students' requests would reach the service one at a time instead of sharing forward passes.
        lock = self.engine.lock if getattr(self.gen, "needs_engine_lock", True) else contextlib.nullcontext()
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
            with self.engine.lock:
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
        _clear_flags(str(self.run.id))
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
        _clear_flags(str(self.run.id))


def _clear_flags(run_id: str) -> None:
    try:
        sync_redis().delete(cancel_key(run_id), detach_key(run_id), watchers_key(run_id))
    except Exception:  # noqa: BLE001
        pass
