"""The admin keeps sections apart as the class pages do: an instructor walks every admin page their group may
view and meets no learner record of a student outside the cohorts they teach (nor any visitor's)."""
from __future__ import annotations

import pytest
from classes_helpers import make_teacher, take_quiz
from django.contrib import admin
from django.contrib.auth.models import User
from django.urls import reverse

from classes.models import Cohort, Enrollment
from courseapp.instructors import make_instructor
from courseapp.models import Module, ModuleProgress, QuizAttempt
from courseapp.progress import Learner, mark_complete

pytestmark = pytest.mark.django_db


@pytest.fixture
def sections(course):
    people = {}
    for teacher, student in (("alice", "alice-student"), ("mallory", "mallory-student")):
        cohort = Cohort.objects.create(name=f"{teacher}'s section")
        instructor = make_teacher(teacher)
        make_instructor(instructor)  # staff, as `createinstructor` makes them: the admin opens
        cohort.instructors.add(instructor)
        learner = User.objects.create_user(student, password=f"{student}-pass-123")
        Enrollment.objects.create(cohort=cohort, user=learner, source=Enrollment.Source.INVITE)
        take_quiz(learner, "intro", {"q-when": ["c-once"]}, score=0)
        mark_complete(Learner(user=learner, visitor=""), Module.objects.get(slug="intro"))
        people[teacher], people[student] = cohort, learner
    mark_complete(Learner(user=None, visitor="a-visitor-token"), Module.objects.get(slug="intro"))
    return people


def test_an_instructor_sees_only_their_own_students_records_in_the_admin(client, sections):
    mallory = User.objects.get(username="mallory")
    client.force_login(mallory)
    walked = 0
    for model, model_admin in admin.site._registry.items():
        if not model_admin.has_view_permission(_request(mallory)):
            continue
        opts = model._meta
        page = client.get(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
        assert page.status_code == 200, opts.label
        assert "alice-student" not in page.content.decode(), opts.label
        walked += 1
    assert walked >= 2
    for model in (QuizAttempt, ModuleProgress):
        opts = model._meta
        theirs = model.objects.exclude(user=sections["mallory-student"])
        assert theirs.exists()
        for record in theirs:  # alice's student's and the visitor's: as if they did not exist
            response = client.get(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[record.pk]))
            assert response.status_code == 302 and response["Location"] == reverse("admin:index")
        mine = model.objects.get(user=sections["mallory-student"])
        assert client.get(reverse(f"admin:{opts.app_label}_{opts.model_name}_change",
                                  args=[mine.pk])).status_code == 200


def test_a_superuser_still_sees_every_record(client, sections):
    client.force_login(User.objects.create_superuser("root", password="root-pass-123"))
    page = client.get(reverse("admin:courseapp_quizattempt_changelist")).content.decode()
    assert "alice-student" in page and "mallory-student" in page


def _request(user):
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/")
    request.user = user
    return request
