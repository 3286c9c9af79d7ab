"""The server-side reaper: runs whose worker died are failed, and their owner's slot freed, with or without
a socket watching.

A worker refreshes `demos:hb:<run>` every DEMO_HEARTBEAT_INTERVAL while it runs a run (expiring after
DEMO_HEARTBEAT_TTL). Every DEMO_REAPER_INTERVAL, a thread in each web server process (started by
`python -m inferencelab.server`) fails the running runs whose heartbeat has been gone for DEMO_HEARTBEAT_GRACE
on a healthy Redis (`worker_lost`; runstate.judge_heartbeat: a Redis pause is not a dead worker) and the
queued runs that no worker took within DEMO_QUEUE_TIMEOUT (`queue_timeout`), and tells any socket watching
them through the run's group. The updates are conditional on the status, so several servers reaping at
once change each run once.
"""
from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

import redis

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from .models import Run
from .runstate import REDIS_HEALTH, cancel_key, heartbeat_key, judge_heartbeat, run_group, sync_redis

log = logging.getLogger(__name__)
WORKER_LOST = "the worker running this demo stopped responding"
QUEUE_TIMEOUT = "no worker picked up the run in time; try again later"
_missing: dict[str, float] = {}  # running run → when this process first found its heartbeat missing (monotonic)


def _fail(run_id, code: str, message: str, from_status: str) -> bool:
    changed = Run.objects.filter(pk=run_id, status=from_status).update(
        status=Run.Status.ERROR, error_code=code, error_message=message, finished_at=timezone.now())
    if changed:
        try:
            async_to_sync(get_channel_layer().group_send)(
                run_group(run_id), {"type": "run.error", "run_id": str(run_id), "code": code, "message": message})
        except Exception as exc:  # noqa: BLE001 - the database already says it; a watcher's watchdog reads it
            log.warning("could not tell watchers of run %s: %s", run_id, exc)
    return bool(changed)


def reap_once(now=None) -> list[str]:
    """Fail the runs whose worker is gone or never came; returns their ids."""
    now = now or timezone.now()
    ttl = settings.DEMO_HEARTBEAT_TTL
    grace = settings.DEMO_HEARTBEAT_GRACE
    client = sync_redis()
    reaped = []
    running = [str(run_id) for run_id in Run.objects.filter(
        status=Run.Status.RUNNING, replay_of__isnull=True, started_at__lt=now - timedelta(seconds=2 * ttl),
    ).values_list("id", flat=True)]
    for gone in set(_missing) - set(running):
        del _missing[gone]
    for run_id in running:
        asked = time.monotonic()
        lost, since = judge_heartbeat(bool(client.exists(heartbeat_key(run_id))), asked, _missing.get(run_id), grace)
        if since is None:
            _missing.pop(run_id, None)
        else:
            _missing[run_id] = since
        if lost and _fail(run_id, "worker_lost", WORKER_LOST, Run.Status.RUNNING):
            reaped.append(run_id)
    stale = now - timedelta(seconds=settings.DEMO_QUEUE_TIMEOUT)
    for run_id in Run.objects.filter(status=Run.Status.QUEUED, created_at__lt=stale).values_list("id", flat=True):
        client.set(cancel_key(run_id), "queue_timeout", ex=3600)  # a worker that gets to it later skips it
        if _fail(run_id, "queue_timeout", QUEUE_TIMEOUT, Run.Status.QUEUED):
            reaped.append(str(run_id))
    if reaped:
        log.warning("reaped %d run(s): %s", len(reaped), ", ".join(reaped))
    return reaped


def _loop(stop: threading.Event) -> None:
    interval = settings.DEMO_REAPER_INTERVAL
    while not stop.wait(interval):
        try:
            reap_once()
        except Exception as exc:  # noqa: BLE001 - Redis or the database away for a moment: try next time
            if isinstance(exc, redis.exceptions.RedisError):
                REDIS_HEALTH.trouble()  # heartbeats found missing right after say nothing about their workers
            log.warning("reaper pass failed: %s", exc)
        finally:
            close_old_connections()


def start() -> threading.Event:
    """Start the reaper thread (daemon); set the returned event to stop it."""
    stop = threading.Event()
    threading.Thread(target=_loop, args=(stop,), name="demos-reaper", daemon=True).start()
    return stop
