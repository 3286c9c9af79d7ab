"""A module's lab and exercise on the course map and in the student's progress: listed under the module for
everyone, marked done once the student submitted the lab (real lab endpoints, their own runs) or passed the exercise
(the real "Run tests" endpoint, graded in the real sandbox); a failed run or another student's work marks nothing."""
from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from courseapp import practice
from courseapp.content import parse_module_file
from courseapp.loader import load_course, render_module_file
from courseapp.models import Module
from courseapp.practice import exercise_ids
from exercises import catalog
from course_fixtures import REPO_CONTENT
from lab_helpers import lab_markdown, store_run

pytestmark = pytest.mark.django_db
EXERCISE = "serving-metrics"


@pytest.fixture
def practice_course(content_dir):
    """The fixture course with a lab and an exercise in its `cache` module."""
    path = content_dir / "cache.md"
    path.write_text(path.read_text() + "\n" + lab_markdown() + f"\nNow compute.\n\n:::{{exercise}} {EXERCISE}\n:::\n")
    load_course(content_dir)
    return Module.objects.get(slug="cache")


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def map_items(client: Client) -> dict[str, str]:
    """Each lab or exercise on the course map → "done" or "not done yet", as a screen reader hears it."""
    page = client.get("/").content.decode()
    items = re.findall(r'data-practice="([^"]+)"><a href="([^"]+)">.*?<span class="visually-hidden"> \(([^)]+)\)',
                       page)
    return {key: (href, state) for key, href, state in items}


def summary(client: Client) -> str:
    return re.search(r'<span id="practice-progress-label">([^<]+)</span>', client.get("/").content.decode())[1]


def run_tests(client: Client, code: str) -> bool:
    response = client.post(f"/exercises/{EXERCISE}/run/", {"code": code})
    assert response.status_code == 202
    return client.get(response.json()["poll"]).json()["passed"]


def submit_lab(client: Client, owner: str, user) -> None:
    for quant, fp32 in ((190.0, 46.0), (170.0, 44.0), (200.0, 48.0)):
        store_run(owner, "int4-g128", quant, fp32_tps=fp32, user=user)
    for quant in (140.0, 135.0, 150.0):
        store_run(owner, "int8", quant, user=user)
    answers = json.dumps({"answers": {"speedup": "4.1", "bytes": "int4", "why": "fewer bytes"}})
    response = client.post("/labs/cache/formats/submit", answers, content_type="application/json")
    assert response.status_code == 200 and response.json()["attempt"]["submitted_at"]


def test_the_map_lists_a_module_s_lab_and_exercise_for_a_visitor_without_making_a_session(practice_course, client):
    items = map_items(client)
    assert items == {"lab:formats": ("/modules/cache/#lab-formats", "not done yet"),
                     f"exercise:{EXERCISE}": (f"/modules/cache/#exercise-{EXERCISE}", "not done yet")}
    assert summary(client) == "0 of 2 labs and exercises done"
    assert "Lab: Formats" in client.get("/").content.decode()
    assert "Exercise: " + catalog.get(EXERCISE).title in client.get("/").content.decode()
    assert not client.cookies.get("sessionid")
    page = client.get("/modules/cache/").content.decode()  # the anchors the map links to exist on the page
    assert 'id="lab-formats"' in page and f'id="exercise-{EXERCISE}"' in page


def test_a_passed_exercise_and_a_submitted_lab_count_as_done(practice_course, worker, student, django_user_model):
    client = signed_in(student)
    assert not run_tests(client, catalog.get(EXERCISE).starter)  # a wrong answer: still not done
    assert map_items(client)[f"exercise:{EXERCISE}"][1] == "not done yet"
    assert run_tests(client, catalog.get(EXERCISE).reference)
    assert map_items(client)[f"exercise:{EXERCISE}"][1] == "done"
    assert map_items(client)["lab:formats"][1] == "not done yet"  # answered is not submitted
    client.post("/labs/cache/formats/answers", json.dumps({"answers": {"speedup": "4"}}),
                content_type="application/json")
    assert summary(client) == "1 of 2 labs and exercises done"
    submit_lab(client, f"u:{student.pk}", student)
    assert set(map_items(client).values()) == {("/modules/cache/#lab-formats", "done"),
                                               (f"/modules/cache/#exercise-{EXERCISE}", "done")}
    assert summary(client) == "2 of 2 labs and exercises done"
    other = signed_in(django_user_model.objects.create_user("other", password="other-pass-123"))
    assert summary(other) == "0 of 2 labs and exercises done"  # nobody else's progress moved


def test_a_visitor_s_passed_exercise_counts_in_their_session(practice_course, worker, client):
    assert run_tests(client, catalog.get(EXERCISE).reference)
    assert map_items(client)[f"exercise:{EXERCISE}"][1] == "done"
    assert map_items(Client())[f"exercise:{EXERCISE}"][1] == "not done yet"


def test_only_embedded_exercise_widgets_count_not_their_name_in_text(practice_course):
    html = Module.objects.get(slug="cache").html
    assert exercise_ids(html) == (EXERCISE,)
    assert exercise_ids('<pre><code>:::{exercise} sampler\n:::</code></pre><p>data-exercise="roofline"</p>') == ()


def test_an_edited_lesson_s_exercises_show_at_once_and_a_fresh_process_reads_them(practice_course, content_dir,
                                                                                   client):
    path = content_dir / "cache.md"
    path.write_text(path.read_text().replace(f":::{{exercise}} {EXERCISE}", ":::{exercise} roofline"))
    load_course(content_dir)
    assert set(map_items(client)) == {"lab:formats", "exercise:roofline"}
    practice._exercises_seen.clear()  # as in another server process, which never saw the save
    assert set(map_items(client)) == {"lab:formats", "exercise:roofline"}


def test_every_module_of_the_course_has_a_lab_or_an_exercise():
    """The glossary is a reference page, not a module one studies: it is the only one without."""
    without = []
    for path in sorted(REPO_CONTENT.glob("*.md")):
        module = parse_module_file(path)
        rendered = render_module_file(module)
        if not rendered.labs and not exercise_ids(rendered.html):
            without.append(module.slug)
    assert without == ["glossary"]
