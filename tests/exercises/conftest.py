"""Fixtures for the code-exercise tests: the real sandbox (bubblewrap must be installed) and the `cpu` queue as a
direct call of the real task."""
from __future__ import annotations

import pytest

from exercises import sandbox
from exercises.jobs import RUN_TASK, run_submission


@pytest.fixture(scope="session")
def sandbox_ready() -> None:
    try:
        sandbox.check_available()
    except sandbox.SandboxUnavailable as exc:
        pytest.fail(f"{exc} (`make test` installs bubblewrap: apt-get install bubblewrap)")


@pytest.fixture(autouse=True)
def fresh_cache():
    """The visitor-session quota counts in the cache: each test starts from zero."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def eager_worker(monkeypatch, sandbox_ready) -> list[str]:
    """Each message sent to the `cpu` queue is run at once by what the worker's task runs (exercises.jobs, real
    sandbox; the Celery wrapper's close_old_connections would close the test's transaction, and
    test_worker.py runs it on a real worker); the ids sent, in order."""
    sent: list[str] = []

    def send_task(name, args, **kwargs):
        assert name == RUN_TASK and kwargs["queue"] == "cpu"
        sent.append(args[0])
        run_submission(*args)

    monkeypatch.setattr("exercises.jobs.app.send_task", send_task)
    return sent


@pytest.fixture
def idle_worker(monkeypatch) -> list[str]:
    """Messages sent to the `cpu` queue are kept, not run (a worker that has not taken them yet)."""
    sent: list[str] = []
    monkeypatch.setattr("exercises.jobs.app.send_task", lambda name, args, **kwargs: sent.append(args[0]))
    return sent
