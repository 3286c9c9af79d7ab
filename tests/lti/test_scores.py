"""Assignment and Grade Services: every quiz attempt after a launch owes the platform's line item the student's best
score; the request only leaves a pending post (and queues its job), and the `cpu` worker's job sends it through a
client-credentials token the platform grants against the tool's published key (`scores.send`, the body of the
worker's job `workers.scores.send_score`; tests/lti/test_scores_worker.py runs a real worker and broker)."""
from __future__ import annotations

from datetime import timedelta

from django.core.management import call_command
from django.utils import timezone
from lti_platform import INSTRUCTOR, LEARNER, SCORE_SCOPE, launch, post_quiz

from courseapp.models import QuizAttempt
from lti import scores
from lti.models import ScorePost

PASS = {"q1": "1", "q2": ["1", "2"]}  # 2/2 on the fixture course's intro quiz
FAIL = {"q1": "2", "q2": ["1"]}  # 0/2


def _student_launch(client, platform, sub="stu-ags"):
    response = launch(client, platform, platform.resource_claims(sub, LEARNER, module="intro"))
    assert response.status_code == 302


def _answer(client, answers, capture):
    with capture(execute=True):
        response = post_quiz(client, "intro", answers)
    assert response.status_code == 200
    return response


def test_the_quiz_answer_only_leaves_a_pending_post_and_the_job_sends_it(client, course, platform,
                                                                         django_capture_on_commit_callbacks):
    _student_launch(client, platform)
    _answer(client, PASS, django_capture_on_commit_callbacks)
    assert platform.scores == [] and platform.token_requests == []  # the request never called the platform
    post = ScorePost.objects.get()
    assert post.state == ScorePost.State.PENDING and post.tries == 0 and post.activity == "quiz"

    assert scores.send(post.pk) is True
    assert [r.get("scope") for r in platform.token_requests] == [SCORE_SCOPE]  # the assertion verified
    [received] = platform.scores
    assert received["path"] == "/lineitems/7/scores"
    assert received["content_type"] == "application/vnd.ims.lis.v1.score+json"
    body = received["body"]
    assert body["scoreGiven"] == 2 and body["scoreMaximum"] == 2 and body["userId"] == "stu-ags"
    assert body["activityProgress"] == "Completed" and body["gradingProgress"] == "FullyGraded"
    assert body["timestamp"]
    post.refresh_from_db()
    assert post.state == ScorePost.State.SENT and post.tries == 1 and post.answer.startswith("Accepted")
    assert scores.send(post.pk) is False and len(platform.scores) == 1  # a redelivered job sends nothing twice


def test_every_score_is_sent_and_never_lowers_the_best(client, course, platform,
                                                       django_capture_on_commit_callbacks):
    _student_launch(client, platform)
    _answer(client, FAIL, django_capture_on_commit_callbacks)
    first = ScorePost.objects.get()
    assert (first.score_given, first.score_maximum) == (0, 2)  # a failed quiz is a score too
    assert scores.send(first.pk)
    _answer(client, PASS, django_capture_on_commit_callbacks)
    _answer(client, FAIL, django_capture_on_commit_callbacks)  # worse than the best: the best is sent again
    pending = list(ScorePost.objects.filter(state=ScorePost.State.PENDING))
    assert [p.score_given for p in pending] == [2]  # the newer post superseded the one not sent yet
    assert ScorePost.objects.filter(state=ScorePost.State.SUPERSEDED).count() == 1
    assert scores.send(pending[0].pk)
    assert [s["body"]["scoreGiven"] for s in platform.scores] == [0, 2]


def test_a_quiz_not_launched_from_the_lms_posts_nothing(client, course, platform, django_capture_on_commit_callbacks):
    _answer(client, PASS, django_capture_on_commit_callbacks)
    assert not ScorePost.objects.exists()


def test_an_instructor_launch_owes_no_score(client, course, platform, django_capture_on_commit_callbacks):
    launch(client, platform, platform.resource_claims("teach-ags", INSTRUCTOR, module="intro"))
    _answer(client, PASS, django_capture_on_commit_callbacks)
    assert not ScorePost.objects.exists()


def test_a_platform_that_is_down_gets_the_score_from_the_sweep_once_due(client, course, platform, settings,
                                                                        django_capture_on_commit_callbacks):
    settings.LTI_SCORE_RETRY_BASE = 30
    _student_launch(client, platform)
    platform.down = True
    response = _answer(client, PASS, django_capture_on_commit_callbacks)
    assert "You scored <strong>2/2</strong>" in response.content.decode()
    assert QuizAttempt.objects.get().score == 2  # the attempt is kept
    post = ScorePost.objects.get()
    assert scores.send(post.pk) is False
    post.refresh_from_db()
    assert post.state == ScorePost.State.PENDING and post.tries == 1 and "503" in post.answer
    wait = (post.next_try_at - timezone.now()).total_seconds()
    assert 25 < wait <= 30  # LTI_SCORE_RETRY_BASE after the first try

    platform.down = False
    assert scores.send_due() == (0, 0)  # not due yet: the sweep leaves it
    ScorePost.objects.filter(pk=post.pk).update(next_try_at=timezone.now() - timedelta(seconds=1))
    assert scores.send_due() == (1, 0)
    post.refresh_from_db()
    assert post.state == ScorePost.State.SENT and post.tries == 2
    assert [s["body"]["scoreGiven"] for s in platform.scores] == [2]


def test_the_pause_doubles_each_try_up_to_the_cap(settings):
    settings.LTI_SCORE_RETRY_BASE, settings.LTI_SCORE_RETRY_CAP = 30, 3600
    assert [scores.retry_delay(n).total_seconds() for n in range(1, 9)] == [30, 60, 120, 240, 480, 960, 1920, 3600]


def test_a_post_is_given_up_after_the_last_try(client, course, platform, settings,
                                               django_capture_on_commit_callbacks):
    settings.LTI_SCORE_MAX_TRIES = 2
    _student_launch(client, platform)
    _answer(client, PASS, django_capture_on_commit_callbacks)
    platform.down = True
    post = ScorePost.objects.get()
    scores.send(post.pk)
    ScorePost.objects.filter(pk=post.pk).update(next_try_at=timezone.now())
    assert scores.send_due() == (0, 1)
    post.refresh_from_db()
    assert post.state == ScorePost.State.FAILED and post.tries == 2 and post.next_try_at is None
    assert scores.send_due() == (0, 0)  # the sweep never tries a failed post again by itself


def test_a_refusal_no_retry_can_change_fails_at_once(client, course, platform, django_capture_on_commit_callbacks):
    _student_launch(client, platform)
    _answer(client, PASS, django_capture_on_commit_callbacks)
    platform.score_status = 422
    post = ScorePost.objects.get()
    assert scores.send(post.pk) is False
    post.refresh_from_db()
    assert post.state == ScorePost.State.FAILED and post.answer.startswith("HTTP 422") and "score refused" in post.answer

    platform.score_status = 200
    scores.resend(post)
    post.refresh_from_db()
    assert post.state == ScorePost.State.PENDING and post.tries == 0
    assert scores.send(post.pk) and platform.scores[-1]["body"]["scoreGiven"] == 2


def test_a_claimed_post_is_not_sent_by_another_worker(client, course, platform, django_capture_on_commit_callbacks):
    _student_launch(client, platform)
    _answer(client, PASS, django_capture_on_commit_callbacks)
    post = ScorePost.objects.get()
    assert scores.claim(post.pk)  # another worker is sending it
    assert scores.send(post.pk) is False and scores.send_due() == (0, 0) and platform.scores == []


def test_the_manual_command_sends_what_is_pending_now(client, course, platform, django_capture_on_commit_callbacks):
    _student_launch(client, platform)
    _answer(client, PASS, django_capture_on_commit_callbacks)
    call_command("lti_send_scores")  # without waiting for the queue grace or a retry's pause
    assert ScorePost.objects.get().state == ScorePost.State.SENT and len(platform.scores) == 1
