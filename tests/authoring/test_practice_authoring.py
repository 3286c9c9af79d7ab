"""Labs and exercises as an author meets them: the format reference lists both directives and every exercise, the
editor's preview and save refuse an unknown exercise or a malformed lab at its line (real HTTP), and a module's lab
and exercise round-trip through the zip export and import and through an export to content/ and `loadcourse`."""
from __future__ import annotations

import html
import io
import json
import zipfile

import pytest
from django.urls import reverse

from authoring_helpers import confirm_import, editor_data, save_live
from courseapp.loader import export_course, load_course
from courseapp.models import Module
from exercises import catalog
from labs.models import Lab

pytestmark = pytest.mark.django_db

LAB_PROPS = {
    "demo": "kv-cache", "title": "Cache on and off", "question": "How much faster is the cache?", "repeats": 2,
    "metric": "tokens_per_s", "params": {"prompt": "The capital of France is", "max_new_tokens": 8},
    "configs": [{"id": "on", "label": "Cache on", "params": {"use_cache": True}},
                {"id": "off", "label": "Cache off", "params": {"use_cache": False}}],
    "questions": [{"id": "speedup", "kind": "ratio", "of": "on", "over": "off", "text": "How many times faster?"}],
}
PRACTICE = (f"## Practice\n\nRun it yourself.\n\n:::{{lab}} cache-on-off\n{json.dumps(LAB_PROPS)}\n:::\n\n"
            "Then compute.\n\n:::{exercise} serving-metrics\n:::\n")


@pytest.fixture
def author(client, course, instructor):
    client.force_login(instructor)
    return client


def text_of(response) -> str:
    return html.unescape(response.content.decode())


def test_the_format_reference_lists_both_directives_and_every_exercise(author):
    page = text_of(author.get(reverse("authoring:reference")))
    assert '<a href="#labs">Labs</a>' in page and '<a href="#exercises">Exercises</a>' in page
    assert ":::{lab} ID" in page and "refused on save and in the preview, at the directive's line" in page
    assert ":::{exercise} batch-scheduler\n:::" in page  # the first id, as an example
    for exercise in catalog.EXERCISES.values():
        assert f"<code>{exercise.id}</code>" in page and exercise.title in page
    online = catalog.get("online-softmax")
    assert f"<code>online_update</code>, <code>tiled_attention</code></td>\n      <td>{len(online.visible)} + " \
           f"{len(online.hidden)}</td>" in page


BAD_BLOCKS = [
    ("Intro.\n\n:::{exercise} no-such-exercise\n:::\n", 3, "unknown exercise: no exercise 'no-such-exercise'"),
    ("Intro.\n\n:::{exercise} sampler\n{\"k\": 1}\n:::\n", 3, "{exercise} sampler takes no props"),
    ("Intro.\n\n:::{lab} cache\n{\"demo\": \"kv-cache\", \"title\": \"T\"\n:::\n", 4,
     "{lab} cache: props are not valid JSON"),
    ("Intro.\n\nMore.\n\n:::{lab} cache\n" + json.dumps({**LAB_PROPS, "configs": LAB_PROPS["configs"][:1]}) + "\n:::\n",
     5, "lab 'cache': 'configs' must be a list of 2 to 6 configurations"),
    ("Intro.\n\n:::{lab} cache\n" + json.dumps({**LAB_PROPS, "metric": "speed"}) + "\n:::\n", 3,
     "lab 'cache': 'metric' must be one of kv_bytes, tokens_per_s, not 'speed'"),
    ("Intro.\n\n:::{lab} cache\n" + json.dumps(LAB_PROPS) + "\n", 3,
     "directive ':::{lab} cache' is never closed"),
]


@pytest.mark.parametrize(("source", "line", "message"), BAD_BLOCKS, ids=[
    "unknown-exercise", "exercise-with-props", "lab-bad-json", "lab-one-config", "lab-unknown-metric",
    "lab-never-closed"])
def test_preview_and_save_refuse_a_bad_block_at_its_line(author, source, line, message):
    preview = author.post(reverse("authoring:preview"), {"source": source})
    assert preview.status_code == 422 and f"Line {line}: {message}" in text_of(preview)
    intro = Module.objects.get(slug="intro")
    before = intro.source
    saved = author.post(reverse("authoring:edit", args=["intro"]), editor_data(intro, source))
    page = text_of(saved)
    assert saved.status_code == 200 and f"Line {line}: {message}" in page and "Not saved" in page
    assert Module.objects.get(slug="intro").source == before and not Lab.objects.filter(module=intro).exists()


def test_preview_renders_a_lab_and_an_exercise_as_students_see_them(author):
    preview = author.post(reverse("authoring:preview"), {"source": PRACTICE})
    page = preview.content.decode()
    assert preview.status_code == 200
    assert 'data-lab="cache-on-off"' in page and "Lab: Cache on and off" in page
    assert 'data-exercise="serving-metrics"' in page and "TTFT, TPOT and goodput from a request log" in page


def practice_state(slug: str) -> tuple:
    module = Module.objects.get(slug=slug)
    return module.source, [(lab.key, lab.order, lab.definition) for lab in Lab.objects.filter(module=module)]


def test_a_lab_and_an_exercise_round_trip_through_the_zip(author):
    intro = Module.objects.get(slug="intro")
    assert save_live(author, "intro", editor_data(intro, intro.source + "\n" + PRACTICE)).status_code == 302
    before = practice_state("intro")
    assert [key for key, _, _ in before[1]] == ["cache-on-off"]
    assert before[1][0][2]["configs"][1]["params"]["use_cache"] is False
    exported = author.get(reverse("authoring:export_zip")).content
    with zipfile.ZipFile(io.BytesIO(exported)) as zf:
        intro_file = zf.read("intro.md").decode()
    assert ":::{lab} cache-on-off\n" in intro_file and ":::{exercise} serving-metrics\n:::" in intro_file

    intro = Module.objects.get(slug="intro")  # changed meanwhile: the lab and the exercise gone
    assert save_live(author, "intro", editor_data(intro, "## Other\n\nText.\n")).status_code == 302
    assert not Lab.objects.filter(module=intro).exists()

    upload = author.post(reverse("authoring:import"), {"archive": io.BytesIO(exported)})
    assert upload.status_code == 302 and confirm_import(author).status_code == 302
    assert practice_state("intro") == before
    assert 'data-exercise="serving-metrics"' in Module.objects.get(slug="intro").html
    student_page = author.get(reverse("courseapp:module", args=["intro"])).content.decode()
    assert 'data-lab="cache-on-off"' in student_page and 'data-exercise="serving-metrics"' in student_page


def test_a_lab_and_an_exercise_round_trip_through_content_and_loadcourse(author, tmp_path):
    intro = Module.objects.get(slug="intro")
    assert save_live(author, "intro", editor_data(intro, intro.source + "\n" + PRACTICE)).status_code == 302
    before = practice_state("intro")
    target = tmp_path / "exported"
    export_course(target)
    Lab.objects.all().delete()
    Module.objects.filter(slug="intro").update(source="## Gone\n")
    load_course(target, force=True)
    assert practice_state("intro") == before
