"""Everything a module needs travels with the course (issue 26/28): module images through content/ (export on the
authoring page or `exportcourse`, back with `loadcourse`), and the demos' reference runs (runs/<demo>.json, which
narration step markers replay) through the course zip; a bad run file is refused naming it, and nothing is lost."""
from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from authoring.archive import ArchiveError, build_zip, import_zip
from courseapp.loader import CourseLoadError, load_course
from courseapp.models import Module, ModuleImage, Track

from authoring_helpers import confirm_import
from test_authoring_images import png, upload

pytestmark = pytest.mark.django_db

REPO_CONTENT = Path(__file__).resolve().parents[2] / "content"
REPO_RUN = (REPO_CONTENT / "runs" / "kv-cache.json").read_bytes()
ALT = "Keys and values: one column per token"


@pytest.fixture
def author(client, course, instructor, settings):
    """An instructor, on a site whose content/ is the fixture course's writable copy."""
    settings.CONTENT_DIR = course
    client.force_login(instructor)
    return client


def state() -> dict:
    return {"modules": list(Module.objects.order_by("slug").values_list("slug", "title", "source", "html")),
            "tracks": list(Track.objects.order_by("slug").values_list("slug", "title")),
            "images": list(ModuleImage.objects.order_by("name").values_list("module__slug", "name", "alt", "digest"))}


# --- Images through content/ ----------------------------------------------------------------------------------


def test_images_reach_content_on_export_and_come_back_on_load(author, course):
    assert upload(author, "intro", png(), ALT).status_code == 302
    assert author.post(reverse("authoring:export")).status_code == 302  # "Export to content/"
    assert (course / "images" / "intro" / "kv-cache-layout.png").read_bytes() == png()
    assert (course / "images" / "intro" / "alt.yaml").read_text() == f"kv-cache-layout.png: '{ALT}'\n"

    # Another server (or this one after its database is lost) loads content/.
    Module.objects.all().delete()
    Track.objects.all().delete()
    call_command("loadcourse", str(course))
    image = ModuleImage.objects.get(module__slug="intro", name="kv-cache-layout.png")
    assert image.alt == ALT
    assert b"".join(author.get("/modules/intro/images/kv-cache-layout.png").streaming_content) == png()


def test_exportcourse_writes_images_and_keeps_alt_lines_of_files_put_there_by_hand(author, course, tmp_path):
    upload(author, "intro", png(), ALT)
    folder = course / "images" / "intro"
    folder.mkdir(parents=True)
    (folder / "by-hand.png").write_bytes(png(3, 3))
    (folder / "alt.yaml").write_text("by-hand.png: Drawn by hand\n")
    call_command("exportcourse", str(course))
    assert (folder / "alt.yaml").read_text() == f"by-hand.png: Drawn by hand\nkv-cache-layout.png: '{ALT}'\n"
    call_command("loadcourse", str(course))  # the hand-made one is loaded too
    assert ModuleImage.objects.get(name="by-hand.png").alt == "Drawn by hand"

    elsewhere = tmp_path / "copy"
    call_command("exportcourse", str(elsewhere))
    assert sorted(p.name for p in (elsewhere / "images" / "intro").iterdir()) == [
        "alt.yaml", "by-hand.png", "kv-cache-layout.png"]


def test_a_plain_load_keeps_an_image_replaced_on_the_web_and_force_takes_the_files(author, course, capsys):
    upload(author, "intro", png(), ALT)
    author.post(reverse("authoring:export"))
    upload(author, "intro", png(4, 4), "A newer picture")  # replaced on the web after the export
    newer = ModuleImage.objects.get().digest

    call_command("loadcourse", str(course))
    assert ModuleImage.objects.get().digest == newer and ModuleImage.objects.get().alt == "A newer picture"
    said = capsys.readouterr().out
    assert "content/images/intro/kv-cache-layout.png differs from the image uploaded on the web" in said

    call_command("loadcourse", str(course), force=True)
    assert ModuleImage.objects.get().digest != newer and ModuleImage.objects.get().alt == ALT


@pytest.mark.parametrize("files, says", [
    ({"plot.png": png(), "alt.yaml": "other.png: Something\n"}, "plot.png has no alt text"),
    ({"plot.png": b"GIF? no", "alt.yaml": "plot.png: A plot\n"}, "Not a PNG, JPEG, GIF or WebP image"),
    ({"Plot.PNG": png(), "alt.yaml": "Plot.PNG: A plot\n"}, "not an image name"),
    ({"plot.png": png(), "alt.yaml": "plot.png: [unclosed\n"}, "not valid YAML"),
])
def test_a_bad_image_in_content_fails_the_load_naming_it_and_changes_nothing(author, course, files, says):
    Module.objects.filter(slug="intro").update(title="Edited on the web")
    folder = course / "images" / "intro"
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    (course / "intro.md").write_text((course / "intro.md").read_text().replace("Training happens once.", "New."))
    before = state()
    with pytest.raises(CommandError) as caught:
        call_command("loadcourse", str(course), force=True)
    assert says in str(caught.value) and "images/intro/" in str(caught.value)
    assert state() == before


def test_images_of_a_module_that_does_not_exist_are_refused(author, course):
    (course / "images" / "ghost").mkdir(parents=True)
    (course / "images" / "ghost" / "plot.png").write_bytes(png())
    (course / "images" / "ghost" / "alt.yaml").write_text("plot.png: A plot\n")
    with pytest.raises(CourseLoadError, match="images for 'ghost', which is not a module"):
        load_course(course)
    assert not ModuleImage.objects.exists()


# --- Reference runs through the course zip ----------------------------------------------------------------------


@pytest.fixture
def real_site(db, settings, tmp_path):
    """The repository's course (kv-cache.md's narration drives its demo from runs/kv-cache.json), loaded from a
    copy that is this site's content/."""
    site = tmp_path / "site-a"
    shutil.copytree(REPO_CONTENT, site)
    settings.CONTENT_DIR = site
    load_course(site)
    return site


def zip_with(data: bytes, changes: dict[str, bytes | str | None]) -> bytes:
    """The zip `data` with entries replaced, added (a value) or removed (None)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(buffer, "w") as target:
        for info in source.infolist():
            if info.filename not in changes:
                target.writestr(info.filename, source.read(info))
        for name, value in changes.items():
            if value is not None:
                target.writestr(name, value)
    return buffer.getvalue()


def test_reference_runs_travel_in_the_zip_to_a_new_server(real_site, settings, tmp_path, client,
                                                          django_capture_on_commit_callbacks):
    exported = build_zip()
    assert zipfile.ZipFile(io.BytesIO(exported)).read("runs/kv-cache.json") == REPO_RUN

    # A new server: an empty database and a content/ without runs.
    Module.objects.all().delete()
    Track.objects.all().delete()
    settings.CONTENT_DIR = tmp_path / "site-b"
    settings.CONTENT_DIR.mkdir()
    with django_capture_on_commit_callbacks(execute=True):
        report = import_zip(io.BytesIO(exported))  # kv-cache.md's step markers are checked against the zip's run
    assert "The reference run of 'kv-cache' (runs/kv-cache.json) added." in report.notes
    assert (settings.CONTENT_DIR / "runs" / "kv-cache.json").read_bytes() == REPO_RUN
    assert "data-reference-run=" in Module.objects.get(slug="kv-cache").html
    run = client.get(reverse("courseapp:reference_run", args=["kv-cache"])).json()
    assert run["demo"] == "kv-cache" and run["steps"] == json.loads(REPO_RUN)["steps"]

    # Importing it again changes no run file and says nothing about runs.
    with django_capture_on_commit_callbacks(execute=True):
        report = import_zip(io.BytesIO(exported))
    assert not [note for note in report.notes if "reference run" in note]


def test_a_directory_export_carries_the_runs_and_a_load_from_it_installs_them(real_site, settings, tmp_path,
                                                                             django_capture_on_commit_callbacks):
    copy = tmp_path / "copy"
    call_command("exportcourse", str(copy))
    assert (copy / "runs" / "kv-cache.json").read_bytes() == REPO_RUN
    settings.CONTENT_DIR = tmp_path / "site-b"
    with django_capture_on_commit_callbacks(execute=True):
        call_command("loadcourse", str(copy), force=True)
    assert (settings.CONTENT_DIR / "runs" / "kv-cache.json").read_bytes() == REPO_RUN


def bad_runs() -> list:
    run = json.loads(REPO_RUN)
    return [
        ("runs/kv-cache.json", '{"demo": "kv-cache",\n "steps": 3,\n "events": [}\n', "not valid JSON", 3),
        ("runs/kv-cache.json", json.dumps({**run, "demo": "paged-attention"}), "named for 'kv-cache'", None),
        ("runs/kv-cache.json", json.dumps({**run, "steps": -1}), '"steps" must be a whole number', None),
        ("runs/kv-cache.json", json.dumps({**run, "events": {"type": "token"}}), '"events" must be a list', None),
        ("runs/kv-cache.json", json.dumps([run]), "one JSON object", None),
        ("runs/kv-cache.json", b"\xff\xfe not text", "not UTF-8", None),
        ("runs/no-such-demo.json", json.dumps({**run, "demo": "no-such-demo"}), "there is no demo 'no-such-demo'",
         None),
    ]


@pytest.mark.parametrize("name, data, says, line", bad_runs())
def test_a_bad_run_file_is_refused_naming_it_and_nothing_is_lost(real_site, name, data, says, line,
                                                                 django_capture_on_commit_callbacks):
    exported = build_zip()
    changed = zip_with(exported, {name: data, "primer.md": None})
    primer = (real_site / "primer.md").read_text()
    changed = zip_with(changed, {"primer.md": primer.replace("## ", "## Changed by the zip ", 1)})
    before = state()
    with django_capture_on_commit_callbacks(execute=True) as callbacks, pytest.raises(CourseLoadError) as caught:
        import_zip(io.BytesIO(changed))
    assert not callbacks
    error = next(e for e in caught.value.errors if e.path == name)
    assert says in error.message and error.line == line
    assert str(error).startswith(name)  # as the page shows it: the file inside the zip first
    assert state() == before
    assert (real_site / "runs" / "kv-cache.json").read_bytes() == REPO_RUN  # the site's own run untouched


@pytest.mark.parametrize("name, says", [
    ("runs/KV-Cache.json", "reference runs go in runs/<demo name>.json"),
    ("runs/kv-cache.txt", "reference runs go in runs/<demo name>.json"),
    ("runs/old/kv-cache.json", "reference runs go in runs/<demo name>.json"),
])
def test_a_run_entry_with_a_wrong_name_is_refused_before_anything_is_extracted(real_site, name, says):
    with pytest.raises(ArchiveError) as caught:
        import_zip(io.BytesIO(zip_with(build_zip(), {name: REPO_RUN})))
    assert any(e.path == name and says in e.message for e in caught.value.errors)


def test_a_bad_run_in_content_fails_loadcourse_naming_it(real_site):
    (real_site / "runs" / "kv-cache.json").write_text('{"demo": "kv-cache", "events": []', encoding="utf-8")
    with pytest.raises(CommandError) as caught:
        call_command("loadcourse", str(real_site))
    assert "runs/kv-cache.json" in str(caught.value) and "not valid JSON" in str(caught.value)


def test_the_import_review_writes_no_run_until_confirmed(real_site, client, instructor, settings, tmp_path,
                                                        django_capture_on_commit_callbacks):
    client.force_login(instructor)
    exported = build_zip()
    settings.CONTENT_DIR = tmp_path / "site-b"
    from django.core.files.uploadedfile import SimpleUploadedFile

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("authoring:import"),
                               {"archive": SimpleUploadedFile("course.zip", exported, "application/zip")})
        assert response.status_code == 302
        review = client.get(reverse("authoring:import_review")).content.decode()
    assert "The reference run of &#x27;kv-cache&#x27; (runs/kv-cache.json) added." in review
    assert not (settings.CONTENT_DIR / "runs").exists()  # shown, not written
    with django_capture_on_commit_callbacks(execute=True):
        confirm_import(client)
    assert (settings.CONTENT_DIR / "runs" / "kv-cache.json").read_bytes() == REPO_RUN
