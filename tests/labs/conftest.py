"""The course fixtures shared by the course's apps' tests (tests/course_fixtures.py), and the exercises' worker."""
import pytest

from course_fixtures import *  # noqa: F401,F403
from exercises import sandbox
from exercises.jobs import RUN_TASK, run_submission


@pytest.fixture
def worker(monkeypatch):
    """The `cpu` queue as the worker's own task, run at once in the real sandbox."""
    try:
        sandbox.check_available()
    except sandbox.SandboxUnavailable as exc:
        pytest.fail(f"{exc} (`make test` installs bubblewrap: apt-get install bubblewrap)")

    def send_task(name, args, **kwargs):
        assert name == RUN_TASK
        run_submission(*args)

    monkeypatch.setattr("exercises.jobs.app.send_task", send_task)
