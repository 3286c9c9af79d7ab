"""Assignment and Grade Services: a passed quiz after a launch posts its score to the platform's line item,
through a client-credentials token the platform grants against the tool's published key."""
from __future__ import annotations

from django.core.management import call_command
from lti_platform import INSTRUCTOR, LEARNER, SCORE_SCOPE, launch, post_quiz

from courseapp.models import QuizAttempt
from lti.models import ScorePost

PASS = {"q1": "1", "q2": ["1", "2"]}  # 2/2 on the fixture course's intro quiz
FAIL = {"q1": "2", "q2": ["1"]}


def _student_launch(client, platform, sub="stu-ags"):
    response = launch(client, platform, platform.resource_claims(sub, LEARNER, module="intro"))
    assert response.status_code == 302


def test_a_passed_quiz_posts_its_score_to_the_platform(client, course, platform, django_capture_on_commit_callbacks):
    _student_launch(client, platform)
    with django_capture_on_commit_callbacks(execute=True):
        assert post_quiz(client, "intro", PASS).status_code == 200
    assert [r.get("scope") for r in platform.token_requests] == [SCORE_SCOPE]  # the assertion verified
    [received] = platform.scores
    assert received["path"] == "/lineitems/7/scores"
    assert received["content_type"] == "application/vnd.ims.lis.v1.score+json"
    body = received["body"]
    assert body["scoreGiven"] == 2 and body["scoreMaximum"] == 2 and body["userId"] == "stu-ags"
    assert body["activityProgress"] == "Completed" and body["gradingProgress"] == "FullyGraded"
    assert body["timestamp"]
    assert ScorePost.objects.get().state == ScorePost.State.SENT


def test_a_failed_quiz_posts_nothing(client, course, platform, django_capture_on_commit_callbacks):
    _student_launch(client, platform)
    with django_capture_on_commit_callbacks(execute=True):
        post_quiz(client, "intro", FAIL)
    assert platform.scores == [] and not ScorePost.objects.exists()
    assert QuizAttempt.objects.count() == 1


def test_a_quiz_not_launched_from_the_lms_posts_nothing(client, course, platform, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        post_quiz(client, "intro", PASS)
    assert platform.scores == [] and not ScorePost.objects.exists()


def test_an_instructor_launch_owes_no_score(client, course, platform, django_capture_on_commit_callbacks):
    launch(client, platform, platform.resource_claims("teach-ags", INSTRUCTOR, module="intro"))
    with django_capture_on_commit_callbacks(execute=True):
        post_quiz(client, "intro", PASS)
    assert platform.scores == [] and not ScorePost.objects.exists()


def test_a_platform_that_is_down_loses_nothing_and_gets_the_score_later(client, course, platform,
                                                                        django_capture_on_commit_callbacks):
    _student_launch(client, platform)
    platform.down = True
    with django_capture_on_commit_callbacks(execute=True):
        response = post_quiz(client, "intro", PASS)
    assert response.status_code == 200 and "You scored <strong>2/2</strong>" in response.content.decode()
    assert QuizAttempt.objects.get().score == 2  # the attempt is kept
    post = ScorePost.objects.get()
    assert post.state == ScorePost.State.PENDING and post.tries == 1 and "503" in post.last_error

    platform.down = False
    call_command("lti_send_scores")
    post.refresh_from_db()
    assert post.state == ScorePost.State.SENT
    assert [s["body"]["scoreGiven"] for s in platform.scores] == [2]


def test_a_later_lower_pass_keeps_the_best_score(client, course, platform, django_capture_on_commit_callbacks):
    _student_launch(client, platform)
    platform.down = True
    with django_capture_on_commit_callbacks(execute=True):
        post_quiz(client, "intro", PASS)
        post_quiz(client, "intro", PASS)
    platform.down = False
    call_command("lti_send_scores")  # the newest is sent, the older one superseded
    assert [s["body"]["scoreGiven"] for s in platform.scores] == [2]
    assert sorted(ScorePost.objects.values_list("state", flat=True)) == ["sent", "superseded"]
