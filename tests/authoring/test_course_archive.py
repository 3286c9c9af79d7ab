"""The course as a zip: export → import round trip is exact; a broken or unsafe zip changes nothing and says why."""
from __future__ import annotations

import html
import io
import stat
import tempfile
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from authoring import archive
from authoring.archive import ArchiveError, build_zip, import_zip
from courseapp.loader import CourseLoadError, export_course
from courseapp.models import Module, Track

from authoring_helpers import confirm_import

pytestmark = pytest.mark.django_db

MODULE_FIELDS = ("title", "short_title", "slug", "track__slug", "order", "prerequisites", "summary", "draft",
                 "source", "html", "cues")


@pytest.fixture
def author(client, course, instructor):
    client.force_login(instructor)
    return client


def course_state() -> dict:
    """Everything an import could change: tracks, modules (authored and derived fields) and quiz rows."""
    return {
        "tracks": list(Track.objects.order_by("slug").values_list("slug", "title", "order", "summary")),
        "modules": list(Module.objects.order_by("slug").values_list(*MODULE_FIELDS)),
        "quiz": [(m.slug, [(q.order, q.text, [(c.text, c.correct, c.explanation) for c in q.choices.all()])
                           for q in m.questions.all()]) for m in Module.objects.order_by("slug")],
    }


def zip_files(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {info.filename: zf.read(info) for info in zf.infolist()}


def make_zip(files: dict[str, bytes | str], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def upload(client, data: bytes, name: str = "course.zip"):
    return client.post(reverse("authoring:import"),
                       {"archive": SimpleUploadedFile(name, data, content_type="application/zip")})


def page_text(response) -> str:
    return html.unescape(response.content.decode())


def line_of(text: str, needle: str) -> int:
    return next(number for number, line in enumerate(text.splitlines(), start=1) if needle in line)


def lesson_line_of(text: str, needle: str) -> int:
    """The line as the editor numbers it: 1 is the first line after the front matter's closing '---'."""
    closing = [number for number, line in enumerate(text.splitlines(), start=1) if line == "---"][1]
    return line_of(text, needle) - closing


# --- Export ----------------------------------------------------------------------------------------------------


def test_download_is_a_zip_of_exactly_what_export_course_writes(author, tmp_path):
    response = author.get(reverse("authoring:export_zip"))
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    today = timezone.localdate().strftime("%Y%m%d")
    assert response["Content-Disposition"] == f'attachment; filename="inference-lab-course-{today}.zip"'
    assert "no-store" in response["Cache-Control"]  # drafts are in it
    target = tmp_path / "server-side"
    written = export_course(target)
    files = zip_files(response.content)
    names = [path.relative_to(target).as_posix() for path in written]
    assert list(files) == names  # the loader's names and order: modules flat, then images/ and runs/
    assert files == {name: (target / name).read_bytes() for name in names}  # byte for byte
    assert "batching.md" in files  # drafts included


def test_list_page_offers_download_and_accessible_import_form(author):
    page = author.get(reverse("authoring:list")).content.decode()
    assert f'href="{reverse("authoring:export_zip")}"' in page and "Download as zip" in page
    assert f'action="{reverse("authoring:import")}" enctype="multipart/form-data"' in page
    assert '<label for="import-archive">' in page and 'id="import-archive" name="archive"' in page
    assert 'accept=".zip' in page and ">Import zip</button>" in page


# --- Import: round trip ----------------------------------------------------------------------------------------


def test_export_then_import_round_trip_is_exact(author):
    before = course_state()
    exported = author.get(reverse("authoring:export_zip")).content
    intro = Module.objects.get(slug="intro")
    intro.title, intro.source = "Changed meanwhile", "## Other\n\nText.\n"
    intro.save()
    Module.objects.filter(slug="cache").delete()
    Track.objects.filter(slug="serving").update(title="Renamed", summary="Other.")
    assert course_state() != before

    response = upload(author, exported)
    assert response.status_code == 302 and response["Location"] == reverse("authoring:import_review")
    response = confirm_import(author)
    assert response.status_code == 302 and response["Location"] == reverse("authoring:list")
    assert course_state() == before  # sources, front matter, rendered HTML, cues, quiz rows: all as exported
    message = page_text(author.get(reverse("authoring:list")))
    assert "Imported course.zip: 1 module(s) created, 1 updated, 1 unchanged; 2 track(s)." in message
    assert zip_files(author.get(reverse("authoring:export_zip")).content) == zip_files(exported)


def test_import_is_idempotent_and_keeps_modules_missing_from_the_zip(author):
    exported = zip_files(build_zip())
    del exported["batching.md"]
    report = import_zip(io.BytesIO(make_zip(exported)))
    assert report.created == [] and report.updated == [] and sorted(report.unchanged) == ["cache", "intro"]
    assert Module.objects.filter(slug="batching").exists()  # like load_course: never deletes
    assert report.notes and "batching" in report.notes[0] and "not in the zip" in report.notes[0]
    assert "course-import-" not in report.notes[0]  # the temporary directory is not shown


def test_files_inside_one_top_level_folder_are_accepted(author, course):
    files = {f"content/{path.name}": path.read_bytes() for path in sorted(Path(course).iterdir())}
    files["content/README.md"] = b"# Not a module\n"  # skipped by the loader, as in content/
    files["__MACOSX/content/._intro.md"] = b"\x00\x05\x16\x07"  # what macOS's Compress adds: ignored
    Module.objects.all().delete()
    response = upload(author, make_zip(files))
    assert response.status_code == 302 and confirm_import(author).status_code == 302
    assert sorted(Module.objects.values_list("slug", flat=True)) == ["batching", "cache", "intro"]


# --- Import: content errors -------------------------------------------------------------------------------------


def test_a_broken_module_changes_nothing_and_names_file_and_line(author):
    before = course_state()
    files = zip_files(build_zip())
    files["intro.md"] = files["intro.md"].replace(b"title: Introduction to inference", b"title: Changed")
    cache = files["cache.md"].decode() + "\n:::{demo} no-such-demo\n:::\n"
    files["cache.md"] = cache.encode()
    response = upload(author, make_zip(files))
    text = page_text(response)
    assert response.status_code == 400
    assert f"cache.md, lesson line {lesson_line_of(cache, 'no-such-demo')}: demo 'no-such-demo': unknown demo" in text
    assert "course.zip was not imported: nothing was changed" in text and "Not imported" in text
    assert course_state() == before  # the valid change to intro.md was not applied either
    # No server path leaks into the messages (the page itself names CONTENT_DIR, which may lie under /tmp).
    assert "course-import-" not in text and f"{tempfile.gettempdir()}/course-" not in text


def test_bad_front_matter_in_a_folder_is_named_as_inside_the_zip(author):
    before = course_state()
    files = {f"course/{name}": data for name, data in zip_files(build_zip()).items()}
    intro = files["course/intro.md"].decode().replace("track: basics", "track: nowhere")
    files["course/intro.md"] = intro.encode()
    with pytest.raises(CourseLoadError) as caught:
        import_zip(io.BytesIO(make_zip(files)))
    assert [str(e) for e in caught.value.errors] == [
        f"course/intro.md:{line_of(intro, 'track: nowhere')}: unknown track 'nowhere': define it in "
        "course/tracks.yaml (known: basics, serving)"]
    assert course_state() == before


def test_invalid_yaml_is_reported_at_its_line(author):
    files = zip_files(build_zip())
    files["tracks.yaml"] = b"- slug: basics\n  title: [unclosed\n"
    response = upload(author, make_zip(files))
    assert response.status_code == 400 and "tracks.yaml:" in page_text(response)


# --- Import: unsafe or unexpected zips ----------------------------------------------------------------------------


def symlink_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        link = zipfile.ZipInfo("intro.md")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
    return buffer.getvalue()


def encrypted_zip() -> bytes:
    data = bytearray(make_zip({"intro.md": "x"}, zipfile.ZIP_STORED))
    data[6] |= 1  # general purpose flag, bit 0 (encrypted), in the local header…
    central = data.rfind(b"PK\x01\x02")
    data[central + 8] |= 1  # …and in the central directory, which zipfile reads
    return bytes(data)


def damaged_zip() -> bytes:
    body = b"---\ntitle: X\n---\n" + b"A" * 200
    data = bytearray(make_zip({"intro.md": body}, zipfile.ZIP_STORED))
    data[data.find(b"A" * 200) + 100] = ord("B")  # the CRC no longer matches
    return bytes(data)


REJECTED = {
    "not a zip": (b"this is plain text, not a zip", None, "not a zip file"),
    "empty upload": (b"", None, "not a zip file"),
    "parent directory": (make_zip({"../evil.md": "x"}), "../evil.md", "'..'"),
    "deep traversal": (make_zip({"content/../../evil.md": "x"}), "content/../../evil.md", "'..'"),
    "absolute path": (make_zip({"/etc/cron.d/evil.md": "x"}), "/etc/cron.d/evil.md", "absolute path"),
    "windows drive": (make_zip({"C:/evil.md": "x"}), "C:/evil.md", "absolute path"),
    "backslashes": (make_zip({"..\\evil.md": "x"}), "..\\evil.md", "'\\'"),
    "symlink": (symlink_zip(), "intro.md", "symbolic link"),
    "nested folders": (make_zip({"a/b/intro.md": "x"}), "a/b/intro.md", "nested folders"),
    "two top folders": (make_zip({"a/intro.md": "x", "b/cache.md": "x"}), None, "one top-level folder"),
    "root and folder": (make_zip({"intro.md": "x", "b/cache.md": "x"}), None, "one top-level folder"),
    "other file type": (make_zip({"run.py": "import os"}), "run.py", "not a course file"),
    "other yaml": (make_zip({"tracks.yml": "[]"}), "tracks.yml", "only tracks.yaml is read"),
    "no course files": (make_zip({}), None, "no tracks.yaml and no module"),
    "too many entries": (make_zip({f"m{i}.md": "x" for i in range(archive.MAX_ENTRIES + 1)}), None,
                         f"{archive.MAX_ENTRIES + 1} entries; an import accepts at most {archive.MAX_ENTRIES}"),
    "zip bomb": (make_zip({"intro.md": b"\0" * (archive.MAX_UNPACKED_BYTES + 1)}), None, "zip bomb"),
    "encrypted": (encrypted_zip(), "intro.md", "encrypted"),
    "damaged": (damaged_zip(), "intro.md", "damaged"),
}


@pytest.mark.parametrize("case", REJECTED)
def test_unsafe_or_unexpected_zip_is_refused_with_a_clear_message(author, case, settings, tmp_path):
    data, entry, message = REJECTED[case]
    settings.CONTENT_DIR = tmp_path / "content-untouched"
    before = course_state()
    with pytest.raises(ArchiveError) as caught:
        import_zip(io.BytesIO(data))
    text = str(caught.value)
    assert message in text
    if entry:
        assert text.startswith(f"{entry}: ")  # names the entry inside the zip
    assert course_state() == before and not settings.CONTENT_DIR.exists()


def test_zip_bomb_is_small_on_the_wire():
    """The bomb case above really is one: a few KB that would unpack past the limit."""
    assert len(REJECTED["zip bomb"][0]) < 20_000


def test_duplicate_entries_are_refused(author):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf, pytest.warns(UserWarning, match="Duplicate name"):
        zf.writestr("intro.md", "one")
        zf.writestr("intro.md", "two")
    with pytest.raises(ArchiveError, match="intro.md: the zip holds this path twice"):
        import_zip(io.BytesIO(buffer.getvalue()))


def test_every_problem_of_a_zip_is_listed_at_once(author):
    with pytest.raises(ArchiveError) as caught:
        import_zip(io.BytesIO(make_zip({"../a.md": "x", "run.py": "x", "intro.md": "x"})))
    assert [e.path for e in caught.value.errors] == ["../a.md", "run.py"]


def test_refusal_is_shown_on_the_page(author):
    before = course_state()
    response = upload(author, make_zip({"../../evil.md": "x"}), name="evil.zip")
    text = page_text(response)
    assert response.status_code == 400
    assert "evil.zip was not imported" in text and "../../evil.md: the path has '..'" in text
    assert course_state() == before


def test_upload_over_the_size_cap_is_refused_before_it_is_opened(author, settings):
    settings.COURSE_IMPORT_MAX_BYTES = 100
    response = upload(author, build_zip())
    assert response.status_code == 400 and "an import accepts at most 0.0 MiB" in page_text(response)


def test_import_without_a_file_says_so(author):
    response = author.post(reverse("authoring:import"))
    assert response.status_code == 400 and "Choose a .zip file to import." in page_text(response)


def test_server_lets_the_import_through_its_socket_cap(settings):
    """Daphne's socket cap is 1 MiB except on upload paths; the import view enforces its own, smaller cap."""
    from inferencelab import server as limited

    limited._limits.cache_clear()
    try:
        assert limited.body_limit(b"/author/import/") == settings.UPLOAD_MAX_BODY_BYTES
        assert settings.COURSE_IMPORT_MAX_BYTES <= settings.UPLOAD_MAX_BODY_BYTES
    finally:
        limited._limits.cache_clear()


# --- Permissions ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("view", ["export", "import"])
def test_student_gets_403_and_anonymous_goes_to_login(client, course, student, view):
    def request():
        if view == "export":
            return client.get(reverse("authoring:export_zip"))
        return upload(client, make_zip({"tracks.yaml": "- slug: hacked\n  title: Hacked\n  order: 9\n"}))

    before = course_state()
    anonymous = request()
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    client.force_login(student)
    assert request().status_code == 403
    assert course_state() == before
