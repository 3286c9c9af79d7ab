"""Logging in as an instructor through the real login form, for the browser tests."""
from __future__ import annotations

from django.contrib.auth.models import Group, Permission, User


def log_in_instructor_in_browser(page, base_url: str, next_path: str) -> None:
    """Create the instructor "teacher" and log in through the real login form, landing on `next_path`.

    Transactional tests flush the data migration's group, so it is recreated as the migration makes it.
    """
    teacher = User.objects.create_user("teacher", password="teacher-pass-123")
    group, _ = Group.objects.get_or_create(name="instructor")
    group.permissions.add(Permission.objects.get(codename="instructor", content_type__app_label="courseapp"))
    teacher.groups.add(group)
    page.goto(f"{base_url}/accounts/login/?next={next_path}")
    page.get_by_label("Username").fill("teacher")
    page.get_by_label("Password").fill("teacher-pass-123")
    page.get_by_role("button", name="Log in").click()
