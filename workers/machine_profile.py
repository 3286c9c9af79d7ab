"""Measure this machine from a demo worker, only while it is idle, and publish it as a `MachineProfile`.

Started by Celery's `worker_ready` as a thread of its own, so it never delays the worker's warm-up nor a run:
it waits until the worker is warm (workers.startup `warm_up`) and runs nothing, then takes `MACHINE_PROFILE_REPEATS`
measurements, each kept only when the worker stayed idle throughout (`Stats.idle_token` the same before and after:
a run that starts meanwhile voids it, and it is taken again once the worker is idle). The stored figures are the
medians with their spread (largest minus smallest). The profile is measured again once it is older than
`MACHINE_PROFILE_MAX_AGE_H` hours. One measurement costs about a second (`workers.measure.SIZES`).

Settings (inferencelab/settings.py, from the environment): `MACHINE_PROFILE` (default on; "0" skips it),
`MACHINE_PROFILE_QUICK` (smaller, fewer measurements: the tests' setting), `MACHINE_PROFILE_REPEATS` (5) and
`MACHINE_PROFILE_MAX_AGE_H` (24).
"""
from __future__ import annotations

import logging
import statistics
import threading
from collections.abc import Callable
from datetime import datetime

from celery.signals import worker_ready
from django.conf import settings

from demos.versions import engine_version
from serverprofile.models import MachineProfile

from .engine import get_engine
from .startup import runs_demos
from .stats import STATS, WORKER_NAME

log = logging.getLogger(__name__)
KEEP = 100  # rows kept: the history of measurements, newest first
FIELDS = ("device", "device_name", "threads", "dtype", "torch_version", "decode_bytes_per_step")
IDLE_POLL_S = 1.0
QUIET_S = 3.0  # how long the worker must have been idle before a measurement starts


def _median_and_spread(values: list) -> tuple:
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return statistics.median(values), max(values) - min(values)


def measure_while_idle(engine, idle: Callable[[], object], *, repeats: int, quick: bool = False,
                       stop: threading.Event | None = None) -> list[dict]:
    """`repeats` measurements of the machine, each started once `idle()` has said the worker runs nothing for
    QUIET_S and kept only when it returns the same token afterwards (None = busy: a token changes when a run
    starts). Waits for idle as long as it takes (or `stop`)."""
    from .measure import measure

    stop = stop or threading.Event()
    samples: list[dict] = []
    while len(samples) < repeats and not stop.is_set():
        before = idle()
        if before is None:
            stop.wait(IDLE_POLL_S)
            continue
        stop.wait(QUIET_S)  # idle for a moment first: a run sent right after the warm-up gets the machine to itself
        if idle() != before:
            continue
        data = measure(engine, quick=quick)
        if idle() == before:
            samples.append(data)
        else:
            log.info("machine profile: a run started during a measurement; it is taken again when idle")
    return samples


def store(samples: list[dict], *, worker: str = ""):
    """The medians (and spreads) of `samples` as the newest `MachineProfile`; the oldest beyond KEEP go."""

    last = samples[-1]
    bandwidth, bandwidth_spread = _median_and_spread([s["bandwidth_gbps"] for s in samples])
    matmul, matmul_spread = _median_and_spread([s["matmul_gflops"] for s in samples])
    step, step_spread = _median_and_spread([s["decode_step_ms"] for s in samples])
    row = MachineProfile.objects.create(
        measured_at=datetime.fromisoformat(last["measured_at"]), worker=worker[:200], model=last["model"] or "",
        engine_version=engine_version(), repeats=len(samples),
        bandwidth_gbps=bandwidth, bandwidth_spread_gbps=round(bandwidth_spread, 2),
        matmul_gflops=matmul, matmul_spread_gflops=round(matmul_spread, 1),
        decode_step_ms=step, decode_step_spread_ms=None if step is None else round(step_spread, 2),
        duration_s=round(statistics.median(s["duration_s"] for s in samples), 2),
        **{k: last[k] for k in FIELDS})
    stale = MachineProfile.objects.order_by("-measured_at", "-pk").values_list("pk", flat=True)[KEEP:]
    MachineProfile.objects.filter(pk__in=list(stale)).delete()
    log.info("machine profile: %s (median of %d idle measurements)", row, len(samples))
    return row


def profile_loop(*, once: bool = False, stop: threading.Event | None = None) -> None:
    """Measure while idle and store; then again each time the profile turns MACHINE_PROFILE_MAX_AGE_H old."""
    from django.db import close_old_connections

    stop = stop or threading.Event()
    quick = settings.MACHINE_PROFILE_QUICK
    repeats = max(1, settings.MACHINE_PROFILE_REPEATS)
    max_age_s = settings.MACHINE_PROFILE_MAX_AGE_H * 3600
    while not stop.is_set():
        try:
            samples = measure_while_idle(get_engine(), STATS.idle_token, repeats=repeats, quick=quick, stop=stop)
            if samples:
                store(samples, worker=WORKER_NAME)
        except Exception:  # noqa: BLE001 - the lessons keep the last profile; keep the worker up
            log.exception("machine profile not measured")
        if once:
            return
        close_old_connections()  # this thread's connection must not outlive the database's idea of it
        stop.wait(max_age_s)


def start(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, name="machine-profile", daemon=True)
    thread.start()
    return thread


@worker_ready.connect
def publish_machine_profile(sender=None, **kwargs):
    if sender is not None and not runs_demos(sender):
        return None  # a `cpu`-only worker has no engine: its machine is not the one the demos run on
    if not settings.MACHINE_PROFILE:
        return None
    return start(profile_loop)
