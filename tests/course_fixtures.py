"""Fixtures for the tests of the course and its apps (courseapp, authoring, narration, search): a writable copy of
the small valid fixture course, fast password hashing, a fresh cache, and per-test media and pending-import folders."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User

from courseapp.loader import load_course

FIXTURES = Path(__file__).parent / "courseapp" / "fixtures"
REPO_CONTENT = Path(__file__).resolve().parents[1] / "content"


@pytest.fixture
def content_dir(tmp_path) -> Path:
    """A writable copy of the small valid fixture course."""
    target = tmp_path / "content"
    shutil.copytree(FIXTURES / "valid", target)
    return target


@pytest.fixture
def course(db, content_dir):
    load_course(content_dir)
    return content_dir


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """PBKDF2's deliberate slowness costs seconds per test user on a small CI machine."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def fresh_cache():
    """The sign-up throttle counts in the cache: no test inherits another's."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture(autouse=True)
def pending_dir(settings, tmp_path):
    """Where a zip import waits for its confirmation (var/pending-imports/ outside the tests)."""
    settings.COURSE_IMPORT_PENDING_DIR = tmp_path / "pending-imports"
    return settings.COURSE_IMPORT_PENDING_DIR


@pytest.fixture
def student(db):
    return User.objects.create_user("student", password="student-pass-123")


@pytest.fixture
def instructor(db):
    user = User.objects.create_user("teacher", password="teacher-pass-123")
    user.groups.add(Group.objects.get(name="instructor"))
    return user
