"""Lesson pages are built once per module version (courseapp/lesson_cache.py), tried over real HTTP (a live server,
`requests`): a second visit rebuilds nothing, an instructor's publish is seen at once, and what is each visitor's
own (progress, the quiz's order, the CSRF token) still differs per visitor."""
from __future__ import annotations

import re
from urllib.parse import urljoin

import pytest
import requests
from authoring_helpers import editor_data

from django.contrib.auth.models import Group, Permission, User

from courseapp import lesson_cache
from courseapp.models import Module

pytestmark = pytest.mark.django_db(transaction=True)
SEED = re.compile(r'name="quiz_seed" value="([^"]+)"')
CSRF = re.compile(r'data-csrf="([^"]+)"')


class Browser:
    """One person's browser: a cookie jar, and forms posted with their CSRF token, as a page would."""

    def __init__(self, base: str):
        self.base, self.http = base, requests.Session()

    def get(self, path: str) -> requests.Response:
        return self.http.get(urljoin(self.base, path), timeout=30)

    def post(self, path: str, data: dict) -> requests.Response:
        if "csrftoken" not in self.http.cookies:
            self.get("/accounts/login/")
        return self.http.post(urljoin(self.base, path),
                              data={**data, "csrfmiddlewaretoken": self.http.cookies["csrftoken"]},
                              headers={"Referer": urljoin(self.base, path)}, allow_redirects=False, timeout=30)

    def log_in(self, username: str, password: str) -> None:
        assert self.post("/accounts/login/", {"username": username, "password": password}).status_code == 302


@pytest.fixture
def teacher(course):
    """An instructor, the group made again if a transactional test flushed the data migration's copy."""
    user = User.objects.create_user("teacher", password="teacher-pass-123")
    group, _ = Group.objects.get_or_create(name="instructor")
    group.permissions.add(Permission.objects.get(codename="instructor", content_type__app_label="courseapp"))
    user.groups.add(group)
    return user


def builds() -> int:
    return lesson_cache.BUILDS["count"]


def test_a_second_visit_and_a_second_visitor_rebuild_nothing(course, live_server, student):
    first, second = Browser(live_server.url), Browser(live_server.url)
    before = builds()
    page = first.get("/modules/intro/")
    assert page.status_code == 200 and "Inference runs for every request." in page.text
    assert builds() == before + 1
    again, other = first.get("/modules/intro/"), second.get("/modules/intro/")
    assert builds() == before + 1  # both from the cache
    assert again.text.count("Inference runs for every request.") == 1
    assert "Inference runs for every request." in other.text
    # Each page's quiz gets its own order and its own form token: never cached.
    seeds = {SEED.search(p.text).group(1) for p in (page, again, other)}
    assert len(seeds) == 3


def test_what_is_each_visitors_own_differs_on_cached_pages(course, live_server, student):
    reader, visitor = Browser(live_server.url), Browser(live_server.url)
    reader.log_in("student", "student-pass-123")
    visitor.get("/accounts/login/")  # a token of its own
    assert reader.post("/modules/cache/complete/", {}).status_code == 302
    before = builds()
    mine, theirs = reader.get("/modules/cache/"), visitor.get("/modules/cache/")
    assert builds() == before + 1  # one build for both of them
    assert "✓ Completed" in mine.text and "Mark this module as complete" not in mine.text
    assert "✓ Completed" not in theirs.text and "Mark this module as complete" in theirs.text
    assert CSRF.search(mine.text).group(1) != CSRF.search(theirs.text).group(1)
    assert "Keys and values of past tokens." in mine.text and "Keys and values of past tokens." in theirs.text


def test_an_instructors_publish_is_served_at_once(course, live_server, teacher):
    student, author = Browser(live_server.url), Browser(live_server.url)
    author.log_in("teacher", "teacher-pass-123")
    assert "Keys and values of past tokens." in student.get("/modules/cache/").text
    module = Module.objects.get(slug="cache")
    source = module.source.replace("Keys and values of past tokens.", "Keys and values, kept per layer.")
    data = editor_data(module, source)
    shown = author.post("/author/cache/", data)  # a published module: kept as its draft, its diff shown
    digest = re.search(r'name="confirm_live" value="([0-9a-f]+)"', shown.text).group(1)
    before = builds()
    still = student.get("/modules/cache/")
    assert "Keys and values of past tokens." in still.text and "kept per layer" not in still.text
    assert builds() == before  # a draft saved aside changes nothing students see: still the cached page
    assert author.post("/author/cache/", {**data, "confirm_live": digest}).status_code == 302  # "Publish"
    fresh = student.get("/modules/cache/")
    assert "Keys and values, kept per layer." in fresh.text and "Keys and values of past tokens." not in fresh.text
    assert builds() == before + 1


def test_publishing_a_draft_module_and_unpublishing_it_are_seen_at_once(course, live_server, teacher):
    student, author = Browser(live_server.url), Browser(live_server.url)
    author.log_in("teacher", "teacher-pass-123")
    assert student.get("/modules/batching/").status_code == 404
    assert "Continuous batching swaps requests" in author.get("/modules/batching/").text  # cached for its author
    assert author.post("/author/batching/publish/", {"draft": "0"}).status_code == 302
    assert "Continuous batching swaps requests" in student.get("/modules/batching/").text
    assert author.post("/author/batching/publish/", {"draft": "1", "confirm": "unpublish"}).status_code == 302
    assert student.get("/modules/batching/").status_code == 404
