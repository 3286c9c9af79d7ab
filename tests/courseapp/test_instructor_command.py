"""`manage.py createinstructor` and the admin's "make instructors" action: staff accounts that reach every
authoring page and the course's admin pages, and nothing else of the admin."""
from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_createinstructor_makes_a_staff_instructor_with_only_the_course(client, course):
    out = io.StringIO()
    call_command("createinstructor", "ada", "--email", "ada@example.org", "--no-input", stdout=out)
    ada = User.objects.get(username="ada")
    assert ada.is_staff and not ada.is_superuser and ada.email == "ada@example.org"
    assert ada.groups.filter(name="instructor").exists() and not ada.has_usable_password()
    assert "changepassword ada" in out.getvalue()
    client.force_login(ada)
    for url in (reverse("authoring:list"), reverse("authoring:edit", args=["intro"]),
                reverse("admin:index"), reverse("admin:courseapp_module_changelist"),
                reverse("admin:narration_narration_changelist"), reverse("admin:courseapp_quizattempt_changelist")):
        assert client.get(url).status_code == 200, url
    for url in (reverse("admin:auth_user_changelist"), reverse("admin:auth_group_changelist"),
                reverse("admin:demos_run_changelist")):
        assert client.get(url).status_code == 403, url


def test_createinstructor_promotes_an_existing_student(client, course, student):
    call_command("createinstructor", "student", "--no-input", stdout=io.StringIO())
    student.refresh_from_db()
    assert student.is_staff and student.has_usable_password()  # the password they had is kept
    client.force_login(student)
    assert client.get(reverse("authoring:list")).status_code == 200


def test_admin_action_makes_instructors(client, course, student):
    admin = User.objects.create_superuser("root", password="root-pass-123")
    client.force_login(admin)
    response = client.post(reverse("admin:auth_user_changelist"),
                           {"action": "make_instructors", "_selected_action": [student.pk]}, follow=True)
    assert "can now author the course" in response.content.decode()
    student.refresh_from_db()
    assert student.is_staff and student.groups.filter(name="instructor").exists()
