"""A module launched from the LMS sends its lab's and its exercise's scores too, each to a grade column of its own
that the tool adds to the LMS course (found again by its tag), beside the quiz's column."""
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from lti_platform import LEARNER, SCORE_SCOPE, launch, post_quiz

from courseapp.models import Module
from exercises import catalog, sandbox
from exercises.jobs import run_submission
from exercises.models import Submission
from labs.models import Lab, LabAttempt
from lti import scores
from lti.models import ScorePost

LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
EMBED = '<section class="exercise" id="exercise-roofline" data-exercise="roofline"></section>'


def _launch(client, platform, *, columns: bool = True, sub: str = "stu-lab"):
    claims = platform.resource_claims(sub, LEARNER, module="intro")
    if columns:
        claims["https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"]["scope"] = [SCORE_SCOPE, LINEITEM_SCOPE]
    assert launch(client, platform, claims).status_code == 302
    return get_user_model().objects.get(lti_identities__subject=sub)


@pytest.fixture
def intro(course):
    module = Module.objects.get(slug="intro")
    Module.objects.filter(pk=module.pk).update(html=module.html + EMBED)
    Lab.objects.create(module=module, key="formats", order=0, definition={"title": "Formats", "questions": []})
    return module


def _submit_lab(user, module, score: float, capture) -> None:
    """As labs/views.py `submit` stores a graded lab."""
    with capture(execute=True):
        LabAttempt.objects.create(user=user, module=module, lab_key="formats", score=score,
                                  submitted_at=timezone.now())


def _send_all() -> None:
    for pk in ScorePost.objects.filter(state=ScorePost.State.PENDING).values_list("pk", flat=True):
        scores.send(pk)


def test_a_submitted_lab_goes_to_a_column_of_its_own(client, intro, platform, django_capture_on_commit_callbacks):
    student = _launch(client, platform)
    _submit_lab(student, intro, 2 / 3, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        post_quiz(client, "intro", {"q1": "1", "q2": ["1", "2"]})
    _send_all()
    [column] = platform.lineitems
    assert column["tag"] == "inference-lab:intro:lab:formats" and column["scoreMaximum"] == 100
    assert column["resourceLinkId"] == "link-1" and "lab formats" in column["label"]
    by_path = {s["path"]: s["body"]["scoreGiven"] for s in platform.scores}
    assert by_path == {"/lineitems/added-1/scores": 67, "/lineitems/7/scores": 2}  # the quiz keeps its column

    # Saved again with the same score: nothing new owed. A second lab score finds the same column again.
    with django_capture_on_commit_callbacks(execute=True):
        LabAttempt.objects.get().save()
    assert not ScorePost.objects.filter(state=ScorePost.State.PENDING).exists()
    LabAttempt.objects.all().delete()
    _submit_lab(student, intro, 1.0, django_capture_on_commit_callbacks)
    _send_all()
    assert len(platform.lineitems) == 1 and platform.scores[-1]["path"] == "/lineitems/added-1/scores"
    assert platform.scores[-1]["body"]["scoreGiven"] == 100


def test_a_link_that_lets_the_tool_add_no_column_gets_the_quiz_score_only(client, intro, platform,
                                                                          django_capture_on_commit_callbacks):
    student = _launch(client, platform, columns=False)
    _submit_lab(student, intro, 1.0, django_capture_on_commit_callbacks)
    assert not ScorePost.objects.exists()


def test_each_graded_exercise_run_sends_the_best_result(client, intro, platform, django_capture_on_commit_callbacks):
    try:
        sandbox.check_available()
    except sandbox.SandboxUnavailable as exc:
        pytest.fail(f"{exc} (`make test` installs bubblewrap)")
    student = _launch(client, platform)
    roofline = catalog.get("roofline")

    def graded_run(code: str) -> None:  # what the `cpu` worker runs for a queued submission
        submission = Submission.objects.create(exercise_id="roofline", owner=f"u:{student.pk}", user=student,
                                               code=code)
        with django_capture_on_commit_callbacks(execute=True):
            assert run_submission(str(submission.pk)) == Submission.Status.DONE

    graded_run(roofline.starter)  # fails its tests
    graded_run(roofline.starter)  # the same result again: not sent twice
    assert list(ScorePost.objects.values_list("activity", "score_given", "score_maximum")) == [
        ("exercise:roofline", 0, 1)]
    _send_all()
    graded_run(roofline.reference)  # passes
    graded_run(roofline.starter)  # a later failure never lowers it
    _send_all()
    assert [s["body"]["scoreGiven"] for s in platform.scores] == [0, 1]
    assert {s["path"] for s in platform.scores} == {"/lineitems/added-1/scores"}
    assert platform.lineitems[0]["tag"] == "inference-lab:intro:exercise:roofline"
