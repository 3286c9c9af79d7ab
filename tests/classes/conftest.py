"""Fixtures for the classes tests: the small fixture course, instructors, students, a cohort."""
from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Group, Permission, User

from courseapp.loader import load_course
from courseapp.models import Module
from courseapp.progress import Learner, record_attempt

FIXTURE_COURSE = Path(__file__).resolve().parents[1] / "courseapp" / "fixtures" / "valid"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def fresh_cache():
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def content_dir(tmp_path) -> Path:
    target = tmp_path / "content"
    shutil.copytree(FIXTURE_COURSE, target)
    return target


@pytest.fixture
def course(db, content_dir):
    load_course(content_dir)
    return content_dir


def make_teacher(username: str) -> User:
    """An instructor as courseapp makes one (the `instructor` group), recreating the group if a transactional
    test flushed the data migration's copy."""
    user = User.objects.create_user(username, password=f"{username}-pass-123")
    group, _ = Group.objects.get_or_create(name="instructor")
    group.permissions.add(Permission.objects.get(codename="instructor", content_type__app_label="courseapp"))
    user.groups.add(group)
    return user


@pytest.fixture
def teacher(db):
    return make_teacher("teacher")


@pytest.fixture
def other_teacher(db):
    return make_teacher("other-teacher")


@pytest.fixture
def student(db):
    return User.objects.create_user("student", password="student-pass-123")


def take_quiz(user, slug: str, answers: dict[str, list[str]], score: int) -> None:
    """Record a quiz attempt as the quiz view does (answers by authored ids); passing completes the module."""
    module = Module.objects.get(slug=slug)
    total = module.questions.count()
    result = SimpleNamespace(score=score, total=total, answers=answers, passed=score >= total * 0.8)
    record_attempt(Learner(user=user, visitor=""), module, result)
