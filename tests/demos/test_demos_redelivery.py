"""A SIGKILLed worker's Celery tickets come back within the broker's visibility timeout, not kombu's hour.

Real processes: Redis, a Celery worker that is SIGKILLed mid-run, a second worker, Daphne (whose reaper fails the
dead worker's run). The workers run with a short CELERY_VISIBILITY_TIMEOUT, the setting under test.
"""
from __future__ import annotations

import time
import uuid

import pytest
import redis
from asgiref.sync import sync_to_async
from demo_helpers import get_run, wait_for
from demo_stack import Stack
from django.conf import settings
from test_demos_scaleout import WS, start_run

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

VISIBILITY = 6  # seconds; the workers sweep every 10 s (settings.CELERY_BROKER_TRANSPORT_OPTIONS)


@pytest.fixture
def stack(tmp_path):
    stack = Stack(tmp_path, str(settings.DATABASES["default"]["TEST"]["NAME"]), {"CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY)})
    try:
        stack.start_redis()
        stack.start_worker("worker-a", concurrency=1, queues="gpu")
        stack.start_daphne()
        yield stack
    finally:
        stack.stop()


async def _ended(run_id: str):
    run = await get_run(run_id)
    return run if run.status in ("done", "cancelled", "error") else None


async def test_a_killed_workers_ticket_is_redelivered_and_harmless(stack, session_cookie):
    (_, cookie), _owner = session_cookie
    r = redis.Redis.from_url(stack.redis_url)
    ws = await WS.connect(stack.http_port, cookie)
    try:
        run_id = await start_run(ws, {"prompt": f"Redelivery ({uuid.uuid4().hex[:8]}): a long story about the sea",
                                      "max_new_tokens": 64, "use_cache": False, "temperature": 0.0})
        await ws.collect(stop=lambda f: f["type"] == "event" and f["event"]["type"] == "token")
    finally:
        await ws.close()
    assert r.hlen("unacked") == 1  # the run's ticket, acked only when the task ends (acks_late)
    stack.kill("worker-a")  # SIGKILL: the ticket is never acked
    killed = time.monotonic()
    run = await wait_for(lambda: _ended(run_id), timeout=30, interval=0.5)
    assert (run.status, run.error_code) == ("error", "worker_lost")

    await sync_to_async(stack.start_worker)("worker-b", concurrency=1, queues="gpu")
    # Back in the queue once the timeout has passed (the new worker's start-up sweep or its next one), taken, and
    # skipped: the run it stood for was already ended by the server. Under kombu's default it would wait an hour.
    done = f"run_demo[{run_id}] succeeded"

    @sync_to_async
    def redelivered_and_taken() -> bool:
        return r.hlen("unacked") == 0 and r.llen("gpu") == 0 and done in stack.log("worker-b")

    await wait_for(redelivered_and_taken, timeout=VISIBILITY + 10 + 30, interval=0.5)
    redelivered = time.monotonic() - killed
    assert "'skipped'" in next(line for line in stack.log("worker-b").splitlines() if done in line)
    assert redelivered < VISIBILITY + 10 + 30
    assert (await get_run(run_id)).error_code == "worker_lost"  # computed no further
