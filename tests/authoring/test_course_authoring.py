"""Instructor authoring: create, edit with validation, live preview, publish, reorder, export, admin."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from courseapp.loader import load_course
from courseapp.models import Module, Track

from authoring_helpers import save_live

pytestmark = pytest.mark.django_db


@pytest.fixture
def author(client, course, instructor):
    client.force_login(instructor)
    return client


def form_data(**overrides):
    data = {"title": "New module", "short_title": "", "slug": "new-module", "track": Track.objects.get(slug="basics").pk,
            "order": 3, "prerequisites": "intro", "summary": "A summary.", "source": "## Hello\n\nWorld.\n",
            "action": "save"}
    data.update(overrides)
    return data


def test_list_shows_tracks_status_and_narration(author):
    html = author.get(reverse("authoring:list")).content.decode()
    assert "Basics" in html and "Serving" in html
    assert "Batching" in html and "Draft" in html and "Not generated" in html


def test_create_form_suggests_the_next_order(author):
    html = author.get(reverse("authoring:create")).content.decode()
    assert 'name="order" value="3"' in html and "## First section" in html


def test_create_module_starts_as_draft(author, client):
    response = author.post(reverse("authoring:create"), form_data())
    assert response.status_code == 302
    module = Module.objects.get(slug="new-module")
    assert module.draft and module.prerequisites == ["intro"] and "World." in module.html
    assert module.cues[0]["text"] == "Hello"


def test_edit_validates_demo_directives_with_line_numbers(author):
    source = "Intro line.\n\n:::{demo} kv-cache\n{\"max_new_tokens\": 5000}\n:::\n"
    response = author.post(reverse("authoring:edit", args=["intro"]),
                           form_data(slug="intro", title="Changed", source=source))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Line 3: demo &#x27;kv-cache&#x27;" in html and "max_new_tokens" in html
    assert "Not saved" in html
    assert 'class="error-summary"' in html and 'href="#id_source"' in html
    assert 'class="preview-error"' in html  # the preview pane says why, too
    assert Module.objects.get(slug="intro").title == "Introduction to inference"


def test_edit_rejects_unknown_demo_and_prerequisite(author):
    response = author.post(reverse("authoring:edit", args=["intro"]),
                           form_data(slug="intro", prerequisites="ghost", source=":::{demo} nope\n:::\n"))
    html = response.content.decode()
    assert "No module with slug: ghost" in html
    assert "Line 1: demo &#x27;nope&#x27;: unknown demo" in html


def test_edit_rejects_prerequisite_cycle(author):
    response = author.post(reverse("authoring:edit", args=["intro"]), form_data(slug="intro", prerequisites="cache"))
    assert "These prerequisites form a cycle: intro → cache → intro." in response.content.decode()
    assert Module.objects.get(slug="intro").prerequisites == []


def test_edit_saves_and_rerenders_quiz(author):
    source = (":::{quiz}\n- question: Only one?\n  choices:\n    - text: Sure\n      correct: true\n"
              "      explanation: Indeed.\n    - text: Never\n      explanation: Nope.\n:::\n")
    response = save_live(author, "intro", form_data(slug="intro", prerequisites="", source=source))
    assert response.status_code == 302
    intro = Module.objects.get(slug="intro")
    assert intro.questions.count() == 1 and intro.slug == "intro"


def test_preview_matches_student_renderer(author):
    response = author.post(reverse("authoring:preview"), {"source": "## Hi\n\n<script>x</script>Text\n"})
    assert response.status_code == 200
    assert '<h2 id="hi" data-cue="c1">Hi</h2>' in response.content.decode()
    assert "<script>" not in response.content.decode()
    error = author.post(reverse("authoring:preview"), {"source": "a\n\n:::{callout} loud\nx\n:::\n"})
    assert error.status_code == 422 and "Line 3" in error.content.decode()


def test_preview_shows_quiz_answers(author):
    intro = Module.objects.get(slug="intro")
    html = author.post(reverse("authoring:preview"), {"source": intro.source}).content.decode()
    assert "quiz-preview" in html and "Training happens once; inference happens for every request." in html


def test_publish_and_unpublish(author, client, student):
    author.post(reverse("authoring:publish", args=["batching"]), {"draft": "0"})
    assert not Module.objects.get(slug="batching").draft
    author.post(reverse("authoring:publish", args=["batching"]), {"draft": "1", "return": "list", "confirm": "unpublish"})
    assert Module.objects.get(slug="batching").draft


def test_reorder_within_track(author):
    author.post(reverse("authoring:move", args=["cache"]), {"direction": "up"})
    orders = dict(Module.objects.filter(track__slug="basics").values_list("slug", "order"))
    assert orders == {"cache": 1, "intro": 2}
    author.post(reverse("authoring:move", args=["cache"]), {"direction": "up"})  # already first
    assert Module.objects.get(slug="cache").order == 1


def test_reorder_writes_only_the_two_modules_that_swap_places(author):
    """Sparse orders stay sparse: an export after a move changes two files, not the whole track."""
    basics = Module.objects.get(slug="intro").track
    Module.objects.filter(slug="intro").update(order=10)
    Module.objects.filter(slug="cache").update(order=20)
    Module.objects.create(slug="extra", title="Extra", track=basics, order=30, source="## X\n")
    author.post(reverse("authoring:move", args=["extra"]), {"direction": "up"})
    orders = dict(Module.objects.filter(track=basics).values_list("slug", "order"))
    assert orders == {"intro": 10, "extra": 20, "cache": 30}
    Module.objects.filter(slug="cache").update(order=20)  # a tie: the track is renumbered once
    author.post(reverse("authoring:move", args=["extra"]), {"direction": "up"})
    orders = dict(Module.objects.filter(track=basics).values_list("slug", "order"))
    assert orders == {"intro": 1, "extra": 2, "cache": 3}


def test_export_writes_content_that_loads_back(author, settings, tmp_path):
    settings.CONTENT_DIR = tmp_path / "exported"
    save_live(author, "intro", form_data(
        slug="intro", prerequisites="", title="Edited in the UI", source="## Hi\r\n\r\nCRLF from a browser.\r\n\r\n"))
    assert Module.objects.get(slug="intro").source == "## Hi\n\nCRLF from a browser.\n\n"  # not stripped
    response = author.post(reverse("authoring:export"), follow=True)
    assert "Exported 4 file(s)" in response.content.decode()
    assert b"\r" not in (settings.CONTENT_DIR / "intro.md").read_bytes()
    text = (settings.CONTENT_DIR / "intro.md").read_text()
    assert text.startswith("---\ntitle: Edited in the UI\nslug: intro\ntrack: basics\norder: 3\n")
    Module.objects.all().delete()
    load_course(settings.CONTENT_DIR)
    assert Module.objects.get(slug="intro").title == "Edited in the UI"


def test_admin_registered(client, course):
    admin = User.objects.create_superuser("admin", password="admin-pass-123")
    client.force_login(admin)
    for name in ("courseapp_module", "courseapp_track", "courseapp_question", "narration_narration",
                 "courseapp_moduleprogress", "courseapp_quizattempt"):
        assert client.get(reverse(f"admin:{name}_changelist")).status_code == 200
    intro = Module.objects.get(slug="intro")
    url = reverse("admin:courseapp_module_change", args=[intro.pk])
    assert client.get(url).status_code == 200
    data = {"title": "Admin edit", "short_title": "", "slug": "intro", "track": intro.track_id, "order": 1,
            "prerequisites": "[]", "summary": "", "draft": "", "source": "## Admin\r\n\r\nEdited.\r\n",
            "questions-TOTAL_FORMS": "0", "questions-INITIAL_FORMS": "0"}
    assert client.post(url, data).status_code == 302
    intro.refresh_from_db()
    assert intro.source == "## Admin\n\nEdited.\n" and intro.cues[0]["text"] == "Admin"
    assert intro.questions.count() == 0  # derived from the new source


def test_glossary_link_appears_when_module_exists(client, course, tmp_path):
    assert "Glossary" not in client.get("/").content.decode()
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "glossary.md").write_text(
        "---\ntitle: Glossary\nslug: glossary\ntrack: basics\norder: 9\ndraft: false\n---\n**TTFT**: time to first token.\n")
    load_course(tmp_path / "g" / "glossary.md")
    assert 'href="/modules/glossary/">Glossary</a>' in client.get("/").content.decode()
