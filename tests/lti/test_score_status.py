"""The gradebook says, per cell, whether the score reached the LMS (pending / sent / failed, with the LMS's answer),
and a failed one has a "Resend" that only a teacher of that cohort can press (POST, with the CSRF token)."""
from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from lti_platform import LEARNER, launch, post_quiz

from classes.models import Cohort
from courseapp.instructors import make_instructor
from lti import scores
from lti.models import Context, ScorePost

PASS = {"q1": "1", "q2": ["1", "2"]}


@pytest.fixture
def graded(client, course, platform, django_capture_on_commit_callbacks):
    """A student who launched the intro module and answered its quiz; the LMS cohort with its teacher."""
    assert launch(client, platform, platform.resource_claims("stu-book", LEARNER, module="intro")).status_code == 302
    with django_capture_on_commit_callbacks(execute=True):
        post_quiz(client, "intro", PASS)
    cohort = Context.objects.get().cohort
    teacher = User.objects.create_user("section-teacher", password="teacher-pass-123")
    make_instructor(teacher)
    cohort.instructors.add(teacher)
    return cohort, teacher, ScorePost.objects.get()


def _cell(page: str) -> str:
    return re.search(r'<details class="lms-score[^"]*">.*?</details>', page, re.S).group(0)


def _teacher(teacher, **options) -> Client:
    browser = Client(**options)
    browser.force_login(teacher)
    return browser


def test_each_cell_says_pending_then_sent_with_the_lms_answer(graded, platform):
    cohort, teacher, post = graded
    book = reverse("classes:gradebook", args=[cohort.pk])
    cell = _cell(_teacher(teacher).get(book).content.decode())
    assert "LMS: pending" in cell and "2/2 waiting to be sent" in cell and "Resend" not in cell

    platform.down = True
    scores.send(post.pk)
    cell = _cell(_teacher(teacher).get(book).content.decode())
    assert "LMS: pending" in cell and "not accepted yet (1 try)" in cell and "HTTP 503" in cell

    platform.down = False
    post.refresh_from_db()
    ScorePost.objects.filter(pk=post.pk).update(next_try_at=post.created_at)
    scores.send_due()
    cell = _cell(_teacher(teacher).get(book).content.decode())
    assert "LMS: sent" in cell and "The LMS answered: Accepted" in cell and 'title="2/2 sent' in cell
    student_page = _teacher(teacher).get(reverse("classes:student", args=[cohort.pk, post.identity.user_id]))
    assert "LMS: sent" in student_page.content.decode()


def test_a_failed_score_shows_the_answer_and_its_teacher_resends_it(graded, platform):
    cohort, teacher, post = graded
    platform.score_status = 400
    scores.send(post.pk)
    book = reverse("classes:gradebook", args=[cohort.pk])
    browser = _teacher(teacher, enforce_csrf_checks=True)
    page = browser.get(book).content.decode()
    cell = _cell(page)
    assert "LMS: failed" in cell and "HTTP 400" in cell and "score refused" in cell
    resend = reverse("lti:score_resend", args=[cohort.pk, post.pk])
    assert f'action="{resend}"' in cell

    assert browser.post(resend).status_code == 403  # no CSRF token
    assert browser.get(resend).status_code == 405  # a link cannot resend
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', cell).group(1)
    response = browser.post(resend, {"csrfmiddlewaretoken": token})
    assert response.status_code == 302 and response["Location"] == book
    post.refresh_from_db()
    assert post.state == ScorePost.State.PENDING and post.tries == 0
    platform.score_status = 200
    assert scores.send(post.pk) and platform.scores[-1]["body"]["scoreGiven"] == 2
    assert "LMS: sent" in _cell(browser.get(book).content.decode())


def test_only_a_teacher_of_that_cohort_can_resend(graded, platform, client):
    cohort, _teacher_of_it, post = graded
    platform.score_status = 400
    scores.send(post.pk)
    resend = reverse("lti:score_resend", args=[cohort.pk, post.pk])

    other = User.objects.create_user("other-teacher")
    make_instructor(other)
    Cohort.objects.create(name="Another section").instructors.add(other)
    assert _teacher(other).post(resend).status_code == 404  # not their cohort
    elsewhere = Cohort.objects.get(name="Another section")
    assert _teacher(other).post(reverse("lti:score_resend", args=[elsewhere.pk, post.pk])).status_code == 404
    assert client.post(resend).status_code in (403, 404)  # the student who launched it
    assert Client().post(resend).status_code == 302  # anonymous: the login page
    post.refresh_from_db()
    assert post.state == ScorePost.State.FAILED
