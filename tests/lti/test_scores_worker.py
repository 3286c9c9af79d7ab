"""Grades off the request path, with the real pieces: Redis as `make run` starts it, a Celery worker on the `cpu`
queue as `make run` starts it (threads, -c 2), and the simulated LMS over real HTTP.

- A hanging LMS costs a quiz answer nothing: the request only queues the job (the message is in Redis, the LMS
  heard nothing while the request ran).
- A score answered while the LMS is down arrives once it is back, sent by the worker's own sweep: no command run.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import pytest
import redis
from django.contrib.auth import get_user_model
from django.test import Client
from lti_platform import LEARNER, launch, post_quiz

from lti.models import ScorePost

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "demos"))
from demo_stack import Stack, point_test_process_at  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300), pytest.mark.django_db(transaction=True)]

PASS = {"q1": "1", "q2": ["1", "2"]}
WORKER_ENV = {"LTI_SCORE_RETRY_BASE": "1", "LTI_SCORE_SWEEP_INTERVAL": "0.5"}


@pytest.fixture
def stack(django_db_setup, tmp_path, settings):
    stack = Stack(tmp_path / "stack", str(settings.DATABASES["default"]["TEST"]["NAME"]), extra_env=WORKER_ENV)
    try:
        stack.start_redis()
        point_test_process_at(stack.redis_url)
        yield stack
    finally:
        stack.stop()


def start_cpu_worker(stack: Stack) -> None:
    stack._spawn("cpu-worker", [sys.executable, "-m", "celery", "-A", "inferencelab", "worker", "-P", "threads",
                                "-Q", "cpu", "-c", "2", "-n", "cpu-lti@%h", "--without-gossip", "--without-mingle",
                                "--loglevel", "INFO"])


def wait_for(condition, timeout: float, what: str, log=lambda: ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout:.0f} s\n{log()[-3000:]}")


def answer_time(client: Client) -> float:
    started = time.perf_counter()
    assert post_quiz(client, "intro", PASS).status_code == 200
    return time.perf_counter() - started


def test_a_hanging_lms_adds_nothing_to_a_quiz_answer(stack, course, platform):
    platform.score_delay = 30  # the score endpoint hangs far longer than any request may take
    unlinked, linked = Client(), Client()
    unlinked.force_login(get_user_model().objects.create_user("no-lms"))
    assert launch(linked, platform, platform.resource_claims("stu-hang", LEARNER, module="intro")).status_code == 302
    token_requests = len(platform.token_requests)
    # Interleaved, the fastest of each: the box is shared, so read loosely (the difference, not a time).
    without, with_lms = [], []
    for _ in range(3):
        without.append(answer_time(unlinked))
        with_lms.append(answer_time(linked))
    assert min(with_lms) - min(without) < 0.1, (without, with_lms)
    assert statistics.median(with_lms) < 5  # nowhere near the hanging endpoint's 30 s
    # The request called nobody: the LMS heard nothing, the posts wait, each as one job in the `cpu` queue.
    assert len(platform.token_requests) == token_requests and platform.scores == []
    assert ScorePost.objects.filter(state=ScorePost.State.PENDING).count() == 1  # newer ones supersede
    queued = [json.loads(m)["headers"]["task"] for m in redis.Redis.from_url(stack.redis_url).lrange("cpu", 0, -1)]
    assert queued == ["lti.send_score"] * 3


def test_a_score_answered_while_the_lms_is_down_arrives_when_it_is_back(stack, course, platform):
    start_cpu_worker(stack)
    student = Client()
    assert launch(student, platform, platform.resource_claims("stu-down", LEARNER, module="intro")).status_code == 302
    platform.down = True  # 503 from every endpoint, token and scores
    assert post_quiz(student, "intro", PASS).status_code == 200
    post = ScorePost.objects.get()
    worker_log = lambda: stack.log("cpu-worker")  # noqa: E731

    def tried() -> bool:
        post.refresh_from_db()
        return post.tries >= 1

    wait_for(tried, 120, "the worker's job did not try the post", worker_log)  # the worker's start included
    assert post.state == ScorePost.State.PENDING and "503" in post.answer and platform.scores == []

    platform.down = False  # the LMS is back; nobody runs anything
    wait_for(lambda: ScorePost.objects.filter(pk=post.pk, state=ScorePost.State.SENT).exists(), 30,
             "the score was not sent after the LMS came back", worker_log)
    assert [s["body"]["scoreGiven"] for s in platform.scores] == [2]
    post.refresh_from_db()
    assert post.tries >= 2 and post.answer.startswith("Accepted")
    assert "LTI score sweep: 1 sent" in worker_log()
