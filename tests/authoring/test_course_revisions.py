"""Revisions: every save keeps one, diffs between any two, restore, and a diff before a live module changes."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from courseapp.loader import load_course
from courseapp.models import Module, Track

from authoring_helpers import confirmed

pytestmark = pytest.mark.django_db


@pytest.fixture
def author(client, course, instructor):
    client.force_login(instructor)
    return client


def edit(client, slug: str, source: str, confirm: bool = True, **fields):
    """Post the editor form as a browser would; for a live module, confirm the diff it shows first."""
    module = Module.objects.get(slug=slug)
    data = {"title": module.title, "short_title": module.short_title, "slug": slug, "track": module.track_id,
            "order": module.order, "prerequisites": ", ".join(module.prerequisites), "summary": module.summary,
            "source": source, "action": "save", **fields}
    url = reverse("authoring:edit", args=[slug])
    response = client.post(url, data)
    if confirm and response.status_code == 200 and "confirm_live" in response.content.decode():
        digest = re.search(r'name="confirm_live" value="([0-9a-f]+)"', response.content.decode()).group(1)
        response = client.post(url, {**data, "confirm_live": digest})
    return response


def revision_ids(slug: str) -> list[int]:
    """Oldest first."""
    return list(Module.objects.get(slug=slug).history.order_by("history_date", "history_id")
                .values_list("history_id", flat=True))


def test_every_save_keeps_a_revision_with_its_author_and_reason(author, instructor):
    first = revision_ids("intro")
    assert len(first) == 1  # the content load
    edit(author, "intro", "## Why it matters\n\nFirst edit.\n")
    edit(author, "intro", "## Why it matters\n\nSecond edit.\n")
    history = list(Module.objects.get(slug="intro").history.order_by("history_date", "history_id"))
    assert [h.source.splitlines()[-1] for h in history[1:]] == ["First edit.", "Second edit."]
    assert history[0].history_user is None and history[0].history_change_reason == "Loaded from content/intro.md"
    assert all(h.history_user == instructor for h in history[1:])
    assert history[2].history_change_reason == "Edited in the authoring page"

    page = author.get(reverse("authoring:history", args=["intro"])).content.decode()
    assert page.count("Restore</button>") == 2  # every revision but the current one
    assert "teacher" in page and "content files" in page


def test_reloading_unchanged_content_keeps_no_new_revision(author, course):
    before = revision_ids("intro")
    load_course(course)
    assert revision_ids("intro") == before


def test_diff_between_two_revisions_shows_the_changed_lines(author):
    edit(author, "intro", "## Why it matters\n\nFirst edit.\n")
    edit(author, "intro", "## Why it matters\n\nSecond edit.\n")
    _, one, two = revision_ids("intro")
    html = author.get(reverse("authoring:diff", args=["intro"]), {"from": one, "to": two}).content.decode()
    assert re.search(r'class="diff-removed">.*?First edit\.', html)
    assert re.search(r'class="diff-added">.*?Second edit\.', html)
    assert "(+1 / −1 lines)" in html
    same = author.get(reverse("authoring:diff", args=["intro"]), {"from": two, "to": "current"})
    assert "No difference." in same.content.decode()


@pytest.mark.parametrize("query", [{"from": "999999"}, {"from": "x"}, {"from": "²"}, {}])
def test_diff_of_an_unknown_revision_is_a_404(author, query):
    assert author.get(reverse("authoring:diff", args=["intro"]), query).status_code == 404


def test_restore_brings_the_first_version_back_for_students(author, client, student):
    original = Module.objects.get(slug="intro").source
    edit(author, "intro", "## Why it matters\n\nRewritten twice.\n", title="Retitled")
    edit(author, "intro", "## Why it matters\n\nRewritten again.\n")
    first = revision_ids("intro")[0]
    response = confirmed(author, reverse("authoring:restore", args=["intro", first]), follow=True)
    assert "students see it now" in response.content.decode()
    module = Module.objects.get(slug="intro")
    assert module.source == original and module.title == "Introduction to inference" and not module.draft
    assert len(revision_ids("intro")) == 4  # the restore is a revision too: it can be undone
    assert module.history.first().history_change_reason.startswith("Restored the revision of")

    client.force_login(student)
    page = client.get(module.get_absolute_url()).content.decode()
    assert "Rewritten" not in page and "Introduction to inference" in page


def test_a_revision_that_fails_todays_checks_is_not_restored(author):
    edit(author, "cache", "## What is cached\n\nKeys.\n", prerequisites="")
    with_prerequisite = revision_ids("cache")[0]
    Module.objects.create(slug="extra", title="Extra", track=Track.objects.get(slug="basics"), source="x")
    Module.objects.filter(slug="intro").update(prerequisites=["cache"])  # restoring [intro] would form a cycle
    response = author.post(reverse("authoring:restore", args=["cache", with_prerequisite]), follow=True)
    assert "Not restored" in response.content.decode() and "cycle" in response.content.decode()
    assert Module.objects.get(slug="cache").source == "## What is cached\n\nKeys.\n"


def test_saving_a_live_module_shows_the_diff_before_students_see_it(author):
    url = reverse("authoring:edit", args=["intro"])
    original = Module.objects.get(slug="intro").source
    response = edit(author, "intro", original + "\nA new paragraph.\n", confirm=False)
    html = response.content.decode()
    assert response.status_code == 200 and "Students see this module now" in html
    assert re.search(r'class="diff-added">.*?A new paragraph\.', html)
    assert Module.objects.get(slug="intro").source == original  # nothing published yet

    # A confirmation is for the version shown: an edit made after it is shown again, not published.
    digest = re.search(r'name="confirm_live" value="([0-9a-f]+)"', html).group(1)
    module = Module.objects.get(slug="intro")
    data = {"title": module.title, "short_title": module.short_title, "slug": "intro", "track": module.track_id,
            "order": module.order, "prerequisites": "", "summary": module.summary, "action": "save",
            "confirm_live": digest}
    again = author.post(url, {**data, "source": original + "\nA different paragraph.\n"})
    assert again.status_code == 200 and "Students see this module now" in again.content.decode()
    assert Module.objects.get(slug="intro").source == original

    saved = author.post(url, {**data, "source": original + "\nA new paragraph.\n"})
    assert saved.status_code == 302
    assert Module.objects.get(slug="intro").source.endswith("A new paragraph.\n")


def test_a_draft_or_an_unchanged_save_asks_nothing(author):
    response = edit(author, "batching", "Continuous batching, reworded.\n", confirm=False)
    assert response.status_code == 302  # a draft: students see nothing
    module = Module.objects.get(slug="intro")
    response = edit(author, "intro", module.source, confirm=False)
    assert response.status_code == 302 and len(revision_ids("intro")) == 1


@pytest.mark.parametrize("name, method, args", [
    ("history", "get", ["intro"]),
    ("diff", "get", ["intro"]),
    ("restore", "post", ["intro", 1]),
])
def test_revisions_are_for_instructors_only(client, course, student, name, method, args):
    url = reverse(f"authoring:{name}", args=args)
    anonymous = getattr(client, method)(url)
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    client.force_login(student)
    assert getattr(client, method)(url).status_code == 403
