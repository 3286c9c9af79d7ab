"""In Chromium: a zip import and a restore show their diff and go live only when confirmed; cancel loses
nothing; unpublish lists what breaks; a delete is undone from the list."""
from __future__ import annotations

import io
import zipfile

import pytest
from browser_login import log_in_instructor_in_browser

from authoring.archive import build_zip
from courseapp.loader import load_course
from courseapp.models import Module

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]


@pytest.fixture
def live_course(transactional_db, content_dir, live_server):
    load_course(content_dir)
    return live_server.url


def edited_zip(path) -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(build_zip())) as source, zipfile.ZipFile(buffer, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "intro.md":
                data = data.replace(b"Training happens once.", b"Training happens once, says next term's zip.")
            target.writestr(info.filename, data)
    path.write_bytes(buffer.getvalue())
    return str(path)


def test_a_zip_import_is_reviewed_then_cancelled_or_confirmed(live_course, browser_page, tmp_path):
    page = browser_page
    log_in_instructor_in_browser(page, live_course, "/author/")
    archive = edited_zip(tmp_path / "next-term.zip")

    page.get_by_label("Course zip to import").set_input_files(archive)
    page.get_by_role("button", name="Import zip").click()
    page.get_by_role("heading", name="Nothing has changed yet: check what the import changes").wait_for()
    assert page.locator("tr.diff-added", has_text="says next term's zip").is_visible()
    assert "says next term" not in Module.objects.get(slug="intro").source
    page.get_by_role("button", name="Cancel").click()
    page.get_by_text("Import of next-term.zip cancelled: nothing was changed.").wait_for()
    assert "says next term" not in Module.objects.get(slug="intro").source

    page.get_by_label("Course zip to import").set_input_files(archive)
    page.get_by_role("button", name="Import zip").click()
    page.get_by_role("button", name="Import these changes").click()
    page.get_by_text("Imported next-term.zip: 0 module(s) created, 1 updated").wait_for()
    assert "says next term's zip" in Module.objects.get(slug="intro").source
    assert page.errors == []


def test_restore_unpublish_and_delete_ask_first(live_course, browser_page):
    page = browser_page
    log_in_instructor_in_browser(page, live_course, "/author/intro/history/")
    intro = Module.objects.get(slug="intro")
    intro.title = "Renamed with a revision"
    intro.save()  # a second revision: the first (the content load) can be restored
    page.goto(f"{live_course}/author/intro/history/")
    page.get_by_role("button", name="Restore").first.click()
    page.get_by_role("heading", name="Students see this module now: this is what they will see change").wait_for()
    assert page.locator("tr.diff-removed", has_text="Renamed with a revision").is_visible()
    assert Module.objects.get(slug="intro").title == "Renamed with a revision"
    page.get_by_role("button", name="Restore this revision").click()
    page.get_by_text("students see it now").wait_for()
    assert Module.objects.get(slug="intro").title == "Introduction to inference"

    page.goto(f"{live_course}/author/intro/")
    page.get_by_role("button", name="Unpublish (back to draft)").click()
    page.get_by_role("heading", name="Unpublish “Introduction to inference”?").wait_for()
    assert page.get_by_text("list it as a prerequisite").is_visible()  # cache needs intro
    page.get_by_role("link", name="Cancel").click()
    assert not Module.objects.get(slug="intro").draft

    page.get_by_role("button", name="Delete…").click()
    page.get_by_role("button", name="Delete", exact=True).click()
    page.get_by_text("Deleted “Introduction to inference”").wait_for()
    assert not Module.objects.filter(slug="intro").exists()
    page.get_by_role("button", name="Undo the delete of Introduction to inference").click()
    page.get_by_text("“Introduction to inference” is back: students see it again.").wait_for()
    assert Module.objects.filter(slug="intro").exists()
    assert page.errors == []
