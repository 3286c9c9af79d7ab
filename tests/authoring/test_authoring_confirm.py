"""Nothing an author does goes live unseen: a restore and a zip import show their diff and ask first (cancel
loses nothing), an unpublish asks and lists what it breaks, and a delete from the authoring pages is soft,
with undo."""
from __future__ import annotations

import html
import io
import re
import zipfile

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from authoring.archive import build_zip
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
    url = reverse("authoring:restore", args=["intro", first_revision("intro")])

    asked = author.post(url)
    assert asked.status_code == 200 and "Students see this module now" in text(asked)
    assert re.search(r'class="diff-added">.*?Training happens once\.', asked.content.decode())
    assert re.search(r'class="diff-removed">.*?Edited\.', asked.content.decode())
    assert "Edited." in Module.objects.get(slug="intro").source  # nothing restored yet
    revisions = Module.objects.get(slug="intro").history.count()

    # Cancel is a link back to History: nothing to undo, nothing changed.
    assert f'href="{reverse("authoring:history", args=["intro"])}"' in asked.content.decode()
    assert Module.objects.get(slug="intro").history.count() == revisions

    done = author.post(url, {"confirm": digest_in(asked)})
    assert done.status_code == 302
    assert "Training happens once." in Module.objects.get(slug="intro").source


def test_a_restore_confirmed_for_an_older_diff_is_asked_again(author):
    module = Module.objects.get(slug="intro")
    save_live(author, "intro", editor_data(module, module.source + "\nFirst edit.\n"))
    url = reverse("authoring:restore", args=["intro", first_revision("intro")])
    digest = digest_in(author.post(url))
    save_live(author, "intro", editor_data(module, module.source + "\nAn edit made meanwhile.\n"))

    again = author.post(url, {"confirm": digest})
    assert again.status_code == 200 and "changed since you last looked" in text(again)
    assert "An edit made meanwhile." in Module.objects.get(slug="intro").source


# --- Zip import -------------------------------------------------------------------------------------------------


def zip_with(changes: dict[str, bytes]) -> bytes:
    with zipfile.ZipFile(io.BytesIO(build_zip())) as zf:
        files = {info.filename: zf.read(info) for info in zf.infolist()}
    files.update(changes)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def upload(client, data: bytes):
    return client.post(reverse("authoring:import"),
                       {"archive": SimpleUploadedFile("next-term.zip", data, "application/zip")})


NEW_MODULE = b"---\ntitle: Speculative decoding\nslug: spec\ntrack: basics\norder: 9\n---\nA draft model guesses.\n"


def edited_intro() -> bytes:
    with zipfile.ZipFile(io.BytesIO(build_zip())) as zf:
        return zf.read("intro.md").replace(b"Training happens once.", b"Training happens once, imported.")


def test_a_zip_import_shows_each_files_diff_and_changes_nothing_until_confirmed(author, pending_dir, media_root):
    before = Module.objects.get(slug="intro").source
    response = upload(author, zip_with({"intro.md": edited_intro(), "spec.md": NEW_MODULE}))
    assert response.status_code == 302 and response["Location"] == reverse("authoring:import_review")
    review = author.get(response["Location"])
    page = review.content.decode()
    assert review.status_code == 200 and "Nothing has changed yet" in text(review)
    assert "<code>intro.md</code>" in page and "<code>spec.md</code>" in page and "New</span>" in page
    assert re.search(r'class="diff-added">.*?Training happens once, imported\.', page)
    assert "<code>cache.md</code>" not in page  # unchanged files are not listed
    assert Module.objects.get(slug="intro").source == before and not Module.objects.filter(slug="spec").exists()

    done = author.post(reverse("authoring:import_confirm"), {"confirm": digest_in(review)})
    assert done.status_code == 302 and done["Location"] == reverse("authoring:list")
    assert "imported." in Module.objects.get(slug="intro").source and Module.objects.filter(slug="spec").exists()
    assert not list(pending_dir.glob("*.zip"))  # the kept upload is gone
    assert not (media_root / "pending-imports").exists()  # never where a web server serves files


def test_cancelling_an_import_loses_nothing(author, pending_dir):
    state = list(Module.objects.order_by("slug").values_list("slug", "source", "title", "draft"))
    upload(author, zip_with({"intro.md": edited_intro()}))
    digest = digest_in(author.get(reverse("authoring:import_review")))
    cancelled = author.post(reverse("authoring:import_cancel"), follow=True)
    assert "cancelled: nothing was changed" in text(cancelled)
    assert list(Module.objects.order_by("slug").values_list("slug", "source", "title", "draft")) == state
    assert not list(pending_dir.glob("*.zip"))
    # The cancelled import cannot be confirmed afterwards.
    late = author.post(reverse("authoring:import_confirm"), {"confirm": digest}, follow=True)
    assert "Nothing was imported" in text(late)
    assert list(Module.objects.order_by("slug").values_list("slug", "source", "title", "draft")) == state


def test_an_import_confirmed_after_the_course_changed_is_shown_again(author):
    upload(author, zip_with({"intro.md": edited_intro()}))
    digest = digest_in(author.get(reverse("authoring:import_review")))
    module = Module.objects.get(slug="intro")
    save_live(author, "intro", editor_data(module, module.source + "\nWritten while the import waited.\n"))
    again = author.post(reverse("authoring:import_confirm"), {"confirm": digest})
    assert again.status_code == 200 and "changed since you last looked" in text(again)
    assert "Written while the import waited." in Module.objects.get(slug="intro").source
    assert re.search(r'class="diff-removed">.*?Written while the import waited\.', again.content.decode())


def test_another_sessions_pending_import_cannot_be_confirmed(author, django_user_model):
    upload(author, zip_with({"intro.md": edited_intro()}))
    digest = digest_in(author.get(reverse("authoring:import_review")))
    other = django_user_model.objects.create_user("other-teacher", password="other-pass-123")
    other.groups.add(Group.objects.get(name="instructor"))
    stranger = Client()
    stranger.force_login(other)
    response = stranger.post(reverse("authoring:import_confirm"), {"confirm": digest}, follow=True)
    assert "Nothing was imported" in text(response)
    assert "imported." not in Module.objects.get(slug="intro").source


# --- Unpublish --------------------------------------------------------------------------------------------------


GLOSSARY = "- **KV cache**: keys and values kept between steps.\n- **Prefill**: the prompt's forward pass.\n"


def test_unpublish_asks_and_lists_the_links_prerequisites_and_learners_it_breaks(author, student):
    cache = Module.objects.get(slug="cache")
    intro = Module.objects.get(slug="intro")
    save_live(author, "intro", editor_data(intro, intro.source + "\nSee [the cache](cache.md#what-is-cached).\n"))
    student_client = Client()
    student_client.force_login(student)
    student_client.get(cache.get_absolute_url())  # a learner has started it
    # batching (a draft) lists cache as a prerequisite too, but students do not see drafts: not listed.
    Module.objects.filter(slug="batching").update(draft=False)

    asked = author.post(reverse("authoring:publish", args=["cache"]), {"draft": "1", "return": "list"})
    page = text(asked)
    assert asked.status_code == 200 and "Unpublish “Caching”?" in page
    assert "1 published module(s) link to it" in page and "Introduction to inference" in page
    assert "1 published module(s) list it as a prerequisite" in page and "Batching" in page
    assert "1 learner(s) have started it" in page
    assert not Module.objects.get(slug="cache").draft  # nothing changed yet

    done = author.post(reverse("authoring:publish", args=["cache"]),
                       {"draft": "1", "return": "list", "confirm": "unpublish"})
    assert done.status_code == 302 and done["Location"] == reverse("authoring:list")
    assert Module.objects.get(slug="cache").draft


def test_unpublishing_the_glossary_says_every_lessons_term_links_go(author):
    Module.objects.create(slug="glossary", title="Glossary", track=Module.objects.get(slug="intro").track,
                          order=9, draft=False, source=GLOSSARY)
    page = text(author.post(reverse("authoring:publish", args=["glossary"]), {"draft": "1"}))
    assert "The glossary's 2 terms stop being linked from every lesson" in page
    assert not Module.objects.get(slug="glossary").draft


def test_publishing_asks_nothing(author):
    response = author.post(reverse("authoring:publish", args=["batching"]), {"draft": "0"})
    assert response.status_code == 302 and not Module.objects.get(slug="batching").draft


# --- Delete -----------------------------------------------------------------------------------------------------


def test_delete_asks_then_hides_the_module_everywhere_and_undo_brings_it_back(author, client, student):
    from courseapp.models import ModuleProgress

    learner = Client()
    learner.force_login(student)
    assert learner.get("/modules/cache/").status_code == 200
    assert ModuleProgress.objects.filter(module__slug="cache").exists()  # the module has student data

    asked = author.post(reverse("authoring:delete", args=["cache"]))
    assert asked.status_code == 200 and "Delete “Caching”?" in text(asked)
    assert "1 learner(s) have started it" in text(asked)
    assert learner.get("/modules/cache/").status_code == 200  # nothing changed yet
    assert 'href="/modules/cache/' in learner.get(reverse("search:search"), {"q": "Keys"}).content.decode()

    done = author.post(reverse("authoring:delete", args=["cache"]), {"confirm": "delete"}, follow=True)
    page = text(done)
    assert done.status_code == 200 and "Deleted “Caching”" in page and "Undo delete" in page
    assert "permission" not in page.lower()
    assert learner.get("/modules/cache/").status_code == 404
    assert "/modules/cache/" not in learner.get("/").content.decode()
    assert 'href="/modules/cache/' not in learner.get(reverse("search:search"), {"q": "Keys"}).content.decode()
    assert ModuleProgress.objects.filter(module__slug="cache").exists()  # the records are kept

    undone = author.post(reverse("authoring:undelete", args=["cache"]), follow=True)
    assert "“Caching” is back: students see it again." in text(undone)
    assert learner.get("/modules/cache/").status_code == 200
    assert 'href="/modules/cache/' in learner.get(reverse("search:search"), {"q": "Keys"}).content.decode()


def test_a_deleted_modules_slug_is_not_reused_or_reloaded(author, course):
    from courseapp.loader import load_course

    author.post(reverse("authoring:delete", args=["cache"]), {"confirm": "delete"})
    form = {"title": "New cache", "slug": "cache", "track": Module.all_objects.get(slug="cache").track_id,
            "order": 5, "source": "Text.", "action": "save"}
    response = author.post(reverse("authoring:create"), form)
    assert response.status_code == 200 and "A deleted module has this slug" in text(response)
    report = load_course(course)  # content/ still holds cache.md: the delete stands
    assert any("cache.md was not loaded: its module was deleted" in note for note in report.notes)
    assert not Module.objects.filter(slug="cache").exists()


def test_instructors_are_not_offered_the_admins_hard_delete(author, instructor, admin_client):
    instructor.is_staff = True  # as `createinstructor` makes them
    instructor.save()
    module = Module.objects.get(slug="cache")
    change = author.get(reverse("admin:courseapp_module_change", args=[module.pk]))
    page = change.content.decode()
    assert change.status_code == 200 and "Caching" in page
    assert reverse("admin:courseapp_module_delete", args=[module.pk]) not in page
    assert author.get(reverse("admin:courseapp_module_delete", args=[module.pk])).status_code == 403
    # A softly deleted module is still in the admin, where a superuser can delete it for good.
    author.post(reverse("authoring:delete", args=["cache"]), {"confirm": "delete"})
    assert admin_client.get(reverse("admin:courseapp_module_change", args=[module.pk])).status_code == 200
