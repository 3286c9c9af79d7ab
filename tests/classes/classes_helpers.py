"""Helpers the classes tests share (a module of its own: test files import it, unlike a conftest)."""
from __future__ import annotations

from types import SimpleNamespace

from django.contrib.auth.models import Group, Permission, User

from courseapp.models import Module
from courseapp.progress import Learner, record_attempt


def make_teacher(username: str) -> User:
    """An instructor as courseapp makes one (the `instructor` group), recreating the group if a transactional
    test flushed the data migration's copy."""
    user = User.objects.create_user(username, password=f"{username}-pass-123")
    group, _ = Group.objects.get_or_create(name="instructor")
    group.permissions.add(Permission.objects.get(codename="instructor", content_type__app_label="courseapp"))
    user.groups.add(group)
    return user


def take_quiz(user, slug: str, answers: dict[str, list[str]], score: int) -> None:
    """Record a quiz attempt as the quiz view does (answers by authored ids); passing completes the module."""
    module = Module.objects.get(slug=slug)
    total = module.questions.count()
    result = SimpleNamespace(score=score, total=total, answers=answers, passed=score >= total * 0.8)
    record_attempt(Learner(user=user, visitor=""), module, result)


def log_in_instructor_in_browser(page, base_url: str, next_path: str) -> None:
    """Create the instructor "teacher" and log in through the real login form, landing on `next_path`."""
    make_teacher("teacher")
    page.goto(f"{base_url}/accounts/login/?next={next_path}")
    page.get_by_label("Username").fill("teacher")
    page.get_by_label("Password").fill("teacher-pass-123")
    page.get_by_role("button", name="Log in").click()
