"""Fixtures for the classes tests: the small fixture course, instructors, students, a cohort."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from classes_helpers import make_teacher
from django.contrib.auth.models import User

from courseapp.loader import load_course

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


@pytest.fixture
def teacher(db):
    return make_teacher("teacher")


@pytest.fixture
def instructor(teacher):
    return teacher


@pytest.fixture
def other_teacher(db):
    return make_teacher("other-teacher")


@pytest.fixture
def student(db):
    return User.objects.create_user("student", password="student-pass-123")
