"""Roster sync with the real pieces: Redis and a Celery worker on the `cpu` queue as `make run` starts them, and the
simulated LMS over real HTTP. A student the LMS drops is marked inactive by the worker's own sweep, with no command
run and no instructor launch."""
from __future__ import annotations

import pytest
from django.test import Client
from lti_platform import INSTRUCTOR, LEARNER, launch
from test_roster_sync import enrolled, member
from test_scores_worker import Stack, point_test_process_at, start_cpu_worker, wait_for

from classes.models import Cohort
from lti.models import Context

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300), pytest.mark.django_db(transaction=True)]


@pytest.fixture
def stack(django_db_setup, tmp_path, settings):
    env = {"LTI_ROSTER_SWEEP_INTERVAL": "0.5", "LTI_ROSTER_SYNC_EVERY": "1"}
    stack = Stack(tmp_path / "stack", str(settings.DATABASES["default"]["TEST"]["NAME"]), extra_env=env)
    try:
        stack.start_redis()
        point_test_process_at(stack.redis_url)
        yield stack
    finally:
        stack.stop()


def test_the_cpu_workers_sweep_follows_the_lms_class_list(stack, course, platform, settings):
    settings.LTI_ROSTER_SYNC_EVERY = 1  # the launch's reading schedules the next one as the worker would
    platform.roster = [[member("w-1"), member("w-2"), member("teach-w", INSTRUCTOR)]]
    response = launch(Client(), platform, platform.resource_claims("teach-w", INSTRUCTOR, module="intro", nrps=True))
    assert response.status_code == 302
    cohort = Cohort.objects.get()
    assert enrolled(cohort) == ["w-1", "w-2"]

    platform.roster = [[member("w-1"), member("w-3"), member("teach-w", INSTRUCTOR)]]  # w-2 left, w-3 joined
    start_cpu_worker(stack)
    wait_for(lambda: enrolled(cohort, active=False) == ["w-2"], 120, "the worker's sweep did not read the list",
             lambda: stack.log("cpu-worker"))
    assert enrolled(cohort) == ["w-1", "w-3"]
    assert "1 student newly enrolled, 1 marked as having left" in Context.objects.get().roster_answer
    assert "LTI class list sweep: 1 read" in stack.log("cpu-worker")
