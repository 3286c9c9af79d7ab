"""Measure this machine when a demo worker starts (Celery `worker_ready`) and publish it as a `MachineProfile`.

Runs in the worker, never on a request: after the engine is loaded (the same `get_engine` the runs use) and
before the worker takes its first run, so the measurement neither waits for nor disturbs a demo. It costs
about a second (`inference_core.engine.machine_profile.SIZES`). Settings, each a Django setting or else an environment
variable: `MACHINE_PROFILE` (default on; "0" skips it) and `MACHINE_PROFILE_QUICK` (smaller, fewer
measurements: the tests' setting).
"""
from __future__ import annotations

import logging
import os
from datetime import datetime

from celery.signals import worker_ready
from django.conf import settings

log = logging.getLogger(__name__)
KEEP = 100  # rows kept: the history of worker starts, newest first
FIELDS = ("device", "device_name", "threads", "dtype", "torch_version", "bandwidth_gbps", "matmul_gflops",
          "decode_step_ms", "decode_bytes_per_step", "duration_s")


def flag(name: str, default: bool) -> bool:
    value = getattr(settings, name, os.environ.get(name))
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


def measure_and_store(engine, *, quick: bool = False, worker: str = ""):
    """Measure the machine (and `engine`'s decode step) now and store it as the newest `MachineProfile`."""
    from demos.consumers import engine_version
    from inference_core.engine.machine_profile import measure

    from .models import MachineProfile

    data = measure(engine, quick=quick)
    row = MachineProfile.objects.create(
        measured_at=datetime.fromisoformat(data["measured_at"]), worker=worker[:200], model=data["model"] or "",
        engine_version=engine_version(), **{k: data[k] for k in FIELDS})
    stale = MachineProfile.objects.order_by("-measured_at", "-pk").values_list("pk", flat=True)[KEEP:]
    MachineProfile.objects.filter(pk__in=list(stale)).delete()
    log.info("machine profile: %s (engine's first decode %.1f s, then the measurement %.1f s)", row,
             data["warmup_s"], data["duration_s"])
    return row


@worker_ready.connect
def publish_machine_profile(sender=None, **kwargs):
    from demos.tasks import WORKER_NAME, runs_demos, get_engine

    if sender is not None and not runs_demos(sender):
        return  # a `cpu`-only worker has no engine: its machine is not the one the demos run on
    if not flag("MACHINE_PROFILE", True):
        return
    try:
        measure_and_store(get_engine(), quick=flag("MACHINE_PROFILE_QUICK", False), worker=WORKER_NAME)
    except Exception:  # noqa: BLE001 - the lessons fall back to the recorded profile; keep the worker up
        log.exception("machine profile not measured")
