"""Worker start-up and shutdown: readiness before the first run, and goodbye.

Celery sends `worker_ready` from the consumer before its event loop starts, so a worker warmed here takes no run
on a half-warm engine; a `cpu`-only worker (narration) never loads the engine.
"""
from __future__ import annotations

import logging
import sys
import time

from celery.signals import worker_init, worker_ready, worker_shutting_down
from django.conf import settings

from demos.runstate import CPU_QUEUE

from .engine import get_engine
from .stats import STATS

log = logging.getLogger(__name__)


@worker_init.connect
def short_gil_turns(**kwargs):
    """The worker's threads take turns on the GIL every settings.GIL_SWITCH_INTERVAL (see there): the threads that
    publish events wait less behind the engine's Python."""
    sys.setswitchinterval(settings.GIL_SWITCH_INTERVAL)


def runs_demos(consumer) -> bool:
    """A worker that consumes any queue besides `cpu` takes demo runs (and loads the engine at start)."""
    try:
        return bool(set(consumer.app.amqp.queues.consume_from) - {CPU_QUEUE})
    except Exception:  # noqa: BLE001 - unknown: assume it does
        return True


def concurrency(consumer) -> int:
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
def warm_up(sender=None, **kwargs):
    """Build (or load) the native kernels, load the engine and decode once, publishing each phase, before the
    worker consumes its first run, so the queued frames can say what the worker is doing meanwhile."""
    if sender is not None and not runs_demos(sender):
        return  # a `cpu`-only worker never runs the engine
    from .measure import warm_up as first_decode
    from inference_core.kernels import quant_kernels
    from inference_core.model.config import engine_settings

    STATS.slots = concurrency(sender)
    STATS.warmup_started = time.time()
    STATS.start_reporter()
    try:
        STATS.enter_phase("kernels")
        quant_kernels.load(engine_settings())  # built by `make run`/`make test` beforehand; compiled here only when they were not
        STATS.enter_phase("loading")
        engine = get_engine()
        STATS.enter_phase("first_decode")
        seconds = first_decode(engine)
        log.info("engine warm: first decode %.1f s, %.1f s since the worker started", seconds,
                 time.time() - STATS.warmup_started)
    except Exception:  # noqa: BLE001 - a run will report it to the user; keep the worker up
        log.exception("engine warm-up failed")
    STATS.enter_phase("ready")


@worker_shutting_down.connect
def forget_worker(sender=None, **kwargs):
    STATS.forget()
