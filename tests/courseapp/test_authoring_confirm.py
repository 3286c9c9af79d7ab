"""Nothing an author does goes live unseen: a restore and a zip import show their diff and ask first (cancel
loses nothing), an unpublish asks and lists what it breaks, and a delete from the authoring pages is soft,
with undo."""
from __future__ import annotations

import html
import io
import re
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from courseapp.archive import build_zip
from courseapp.models import Module

from authoring_helpers import editor_data, save_live

pytestmark = pytest.mark.django_db


@pytest.fixture
def author(client, course, instructor):
    client.force_login(instructor)
    return client


def text(response) -> str:
    return html.unescape(response.content.decode())


def digest_in(response, field: str = "confirm") -> str:
    return re.search(rf'name="{field}" value="([^"]+)"', response.content.decode()).group(1)


def first_revision(slug: str) -> int:
    return Module.objects.get(slug=slug).history.order_by("history_date", "history_id").first().history_id


# --- Restore ----------------------------------------------------------------------------------------------------


def test_restore_shows_its_diff_and_changes_nothing_until_confirmed(author):
    module = Module.objects.get(slug="intro")
    save_live(author, "intro", editor_data(module, module.source.replace("Training happens once.", "Edited.")))
    url = reverse("courseapp:author_restore", args=["intro", first_revision("intro")])

    asked = author.post(url)
    assert asked.status_code == 200 and "Students see this module now" in text(asked)
    assert re.search(r'class="diff-added">.*?Training happens once\.', asked.content.decode())
    assert re.search(r'class="diff-removed">.*?Edited\.', asked.content.decode())
    assert "Edited." in Module.objects.get(slug="intro").source  # nothing restored yet
    revisions = Module.objects.get(slug="intro").history.count()

    # Cancel is a link back to History: nothing to undo, nothing changed.
    assert f'href="{reverse("courseapp:author_history", args=["intro"])}"' in asked.content.decode()
    assert Module.objects.get(slug="intro").history.count() == revisions

    done = author.post(url, {"confirm": digest_in(asked)})
    assert done.status_code == 302
    assert "Training happens once." in Module.objects.get(slug="intro").source


def test_a_restore_confirmed_for_an_older_diff_is_asked_again(author):
    module = Module.objects.get(slug="intro")
    save_live(author, "intro", editor_data(module, module.source + "\nFirst edit.\n"))
    url = reverse("courseapp:author_restore", args=["intro", first_revision("intro")])
    digest = digest_in(author.post(url))
    save_live(author, "intro", editor_data(module, module.source + "\nAn edit made meanwhile.\n"))

    again = author.post(url, {"confirm": digest})
    assert again.status_code == 200 and "changed since you last looked" in text(again)
    assert "An edit made meanwhile." in Module.objects.get(slug="intro").source
