"""Search results are kept per query until the course changes (search/cached.py), tried over real HTTP: the same
query again reaches no index, an instructor's publish is found at once, drafts stay an instructor's."""
from __future__ import annotations

import re
from urllib.parse import urljoin

import pytest
import requests
from authoring_helpers import editor_data
from django.contrib.auth.models import Group, Permission, User

from courseapp.models import Module
from search import cached

pytestmark = pytest.mark.django_db(transaction=True)
RESULT = re.compile(r'<h2 class="search-result-title"><a href="([^"]+)"')


class Browser:
    def __init__(self, base: str):
        self.base, self.http = base, requests.Session()

    def search(self, q: str) -> list[str]:
        response = self.http.get(urljoin(self.base, "/search/"), params={"q": q}, timeout=30)
        assert response.status_code == 200
        return RESULT.findall(response.text)

    def post(self, path: str, data: dict) -> requests.Response:
        if "csrftoken" not in self.http.cookies:
            self.http.get(urljoin(self.base, "/accounts/login/"), timeout=30)
        return self.http.post(urljoin(self.base, path),
                              data={**data, "csrfmiddlewaretoken": self.http.cookies["csrftoken"]},
                              headers={"Referer": urljoin(self.base, path)}, allow_redirects=False, timeout=30)


@pytest.fixture
def author(course, live_server) -> Browser:
    user = User.objects.create_user("teacher", password="teacher-pass-123")
    group, _ = Group.objects.get_or_create(name="instructor")
    group.permissions.add(Permission.objects.get(codename="instructor", content_type__app_label="courseapp"))
    user.groups.add(group)
    browser = Browser(live_server.url)
    assert browser.post("/accounts/login/", {"username": "teacher", "password": "teacher-pass-123"}).status_code == 302
    return browser


def searches() -> int:
    return cached.SEARCHES["count"]


def test_the_same_query_again_reaches_no_index(course, live_server):
    visitor, other = Browser(live_server.url), Browser(live_server.url)
    before = searches()
    assert visitor.search("training") == ["/modules/intro/#why-it-matters"]
    assert other.search("training") == ["/modules/intro/#why-it-matters"]
    assert visitor.search("training") == ["/modules/intro/#why-it-matters"]
    assert searches() == before + 1
    assert visitor.search("queries") == ["/modules/cache/#what-is-cached"]  # another query: its own entry
    assert searches() == before + 2


def test_a_publish_is_found_at_once_and_a_draft_only_by_instructors(author, live_server):
    student = Browser(live_server.url)
    assert student.search("swaps") == []  # only in the draft module "batching"
    assert author.search("swaps") == ["/modules/batching/"]  # drafts are shown to instructors: another entry
    module = Module.objects.get(slug="cache")
    data = editor_data(module, module.source.replace("Keys and values of past tokens.",
                                                     "Keys and values of past tokens, reused by paging."))
    shown = author.post("/author/cache/", data)  # published: kept aside as its draft until confirmed
    assert student.search("paging") == []
    digest = re.search(r'name="confirm_live" value="([0-9a-f]+)"', shown.text).group(1)
    assert author.post("/author/cache/", {**data, "confirm_live": digest}).status_code == 302
    assert student.search("paging") == ["/modules/cache/#what-is-cached"]
    assert author.post("/author/batching/publish/", {"draft": "0"}).status_code == 302
    assert student.search("swaps") == ["/modules/batching/"]
    assert author.post("/author/batching/publish/", {"draft": "1", "confirm": "unpublish"}).status_code == 302
    assert student.search("swaps") == []
