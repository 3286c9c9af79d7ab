"""The completion standard (courseapp/completion.py): a module is complete when its quiz is passed AND its lab is
submitted AND its exercise passed, in whatever order the student does them, over the real quiz, lab and "Run tests"
endpoints (graded in the real sandbox); the page says what is met and what is left."""
from __future__ import annotations

import html
import json
import re

import pytest
from django.test import Client

from courseapp.completion import completion_for
from courseapp.loader import load_course
from courseapp.models import Module, ModuleProgress
from courseapp.practice import PracticeItem
from demos.identity import TOKEN_KEY, token_owner
from exercises import catalog
from lab_helpers import lab_markdown, store_run

pytestmark = pytest.mark.django_db
EXERCISE = "serving-metrics"
PASSING = {"q1": "1", "q2": ["1", "2"]}  # the fixture intro's quiz, every answer right


@pytest.fixture
def graded_module(content_dir):
    """The fixture course's `intro` (a two-question quiz) with a lab and an exercise; `cache` (no quiz) with a lab."""
    for slug, extra in (("intro", f"\n:::{{exercise}} {EXERCISE}\n:::\n"), ("cache", "")):
        path = content_dir / f"{slug}.md"
        text = path.read_text()
        at = text.index(":::{quiz}") if ":::{quiz}" in text else len(text)
        path.write_text(text[:at] + "\n" + lab_markdown() + extra + "\n" + text[at:])
    load_course(content_dir)
    return Module.objects.get(slug="intro")


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def post_quiz(client: Client, slug: str, answers: dict) -> str:
    from courseapp.quiz import new_seed, seed_token, shuffled

    seed = new_seed()
    data = {"quiz_seed": seed_token(slug, seed)}
    for question in Module.objects.get(slug=slug).questions.all():
        shown = [c.order for c in shuffled(question, seed)]
        values = answers[question.field_name]
        data[question.field_name] = [str(shown.index(int(v)) + 1) for v in ([values] if isinstance(values, str)
                                                                             else values)]
    response = client.post(f"/modules/{slug}/quiz/", data)
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def state_on_page(client: Client, slug: str) -> str:
    """What the module page's header says: "✓ Completed", or what is met and what is left."""
    page = html.unescape(client.get(f"/modules/{slug}/").content.decode())
    if '<span class="done">✓ Completed</span>' in page:
        return "Completed"
    return re.search(r'<span class="completion-state"[^>]*>([^<]+)</span>', page)[1]


def run_tests(client: Client, code: str) -> bool:
    response = client.post(f"/exercises/{EXERCISE}/run/", {"code": code})
    assert response.status_code == 202
    return client.get(response.json()["poll"]).json()["passed"]


def submit_lab(client: Client, slug: str, owner: str, user=None) -> None:
    for quant, fp32 in ((190.0, 46.0), (170.0, 44.0), (200.0, 48.0)):
        store_run(owner, "int4-g128", quant, fp32_tps=fp32, user=user)
    for quant in (140.0, 135.0, 150.0):
        store_run(owner, "int8", quant, user=user)
    answers = json.dumps({"answers": {"speedup": "4.1", "bytes": "int4", "why": "fewer bytes"}})
    response = client.post(f"/labs/{slug}/formats/submit", answers, content_type="application/json")
    assert response.status_code == 200 and response.json()["attempt"]["submitted_at"]


def completed(user, slug: str) -> bool:
    return ModuleProgress.objects.filter(user=user, module__slug=slug, completed_at__isnull=False).exists()


def test_a_passed_quiz_completes_the_module_only_with_its_lab_submitted_and_exercise_passed(graded_module, worker,
                                                                                            student):
    client = signed_in(student)
    assert state_on_page(client, "intro") == "Quiz not passed yet · lab still to submit · exercise still to pass"
    page = post_quiz(client, "intro", PASSING)
    assert ("Quiz passed. The module is complete once its practice is done too: "
            "Quiz passed · lab still to submit · exercise still to pass.") in page
    assert "this module is complete" not in page and not completed(student, "intro")
    assert not run_tests(client, catalog.get(EXERCISE).starter)  # a failing run changes nothing
    assert state_on_page(client, "intro") == "Quiz passed · lab still to submit · exercise still to pass"
    assert run_tests(client, catalog.get(EXERCISE).reference)
    assert state_on_page(client, "intro") == "Quiz passed · lab still to submit · exercise passed"
    assert not completed(student, "intro")
    submit_lab(client, "intro", f"u:{student.pk}", student)  # the last requirement: complete from this moment
    assert completed(student, "intro") and state_on_page(client, "intro") == "Completed"
    index = client.get("/").content.decode()
    assert re.search(r'<li class="module-card is-complete">\s*<span class="checkmark" aria-hidden="true">✓</span>'
                     r'\s*<div class="module-card-body">\s*<h3><a href="/modules/intro/">', index)


def test_practice_done_first_the_quiz_pass_completes_it_and_a_started_module_says_what_is_left(graded_module,
                                                                                                worker, student):
    client = signed_in(student)
    assert run_tests(client, catalog.get(EXERCISE).reference)
    submit_lab(client, "intro", f"u:{student.pk}", student)
    assert not completed(student, "intro")  # practice without the quiz is not complete either
    assert "Quiz not passed yet · lab submitted · exercise passed" in html.unescape(client.get("/").content.decode())
    assert "Well done: this module is complete." in post_quiz(client, "intro", PASSING)
    assert completed(student, "intro")
    assert post_quiz(client, "intro", {"q1": "2", "q2": ["3"]})  # a worse attempt later takes nothing away
    assert completed(student, "intro")


def test_a_visitor_completes_a_module_when_their_exercise_passes_last(graded_module, worker, client):
    post_quiz(client, "intro", PASSING)
    assert not run_tests(client, "def wrong(:\n")
    submit_lab(client, "intro", token_owner(client.session[TOKEN_KEY]))
    assert state_on_page(client, "intro") == "Quiz passed · lab submitted · exercise still to pass"
    assert run_tests(client, catalog.get(EXERCISE).reference)
    assert state_on_page(client, "intro") == "Completed"
    assert ModuleProgress.objects.get(visitor=client.session["courseapp_visitor"], module__slug="intro").completed
    assert state_on_page(Client(), "intro") == "Quiz not passed yet · lab still to submit · exercise still to pass"


def test_a_module_without_a_quiz_is_marked_complete_only_once_its_lab_is_submitted(graded_module, student):
    client = signed_in(student)
    response = client.post("/modules/cache/complete/", follow=True)
    assert "is complete once its practice is done: Lab still to submit." in html.unescape(response.content.decode())
    assert not completed(student, "cache")
    submit_lab(client, "cache", f"u:{student.pk}", student)
    assert not completed(student, "cache")  # no quiz: the student's own "Mark as complete" stands for it
    response = client.post("/modules/cache/complete/", follow=True)
    assert "marked as complete" in html.unescape(response.content.decode()) and completed(student, "cache")


def test_the_summary_names_each_requirement_and_counts_several_of_a_kind():
    lab = PracticeItem("lab", "a", "A", True)
    todo = [PracticeItem("exercise", k, k, done) for k, done in (("x", True), ("y", False), ("z", False))]
    state = completion_for(5, 4, [lab, *todo])
    assert state.summary == "Quiz passed · lab submitted · 2 of 3 exercises still to pass" and not state.met
    assert completion_for(5, 3, []).summary == "Quiz not passed yet" and not completion_for(5, 3, []).met
    assert completion_for(5, 4, [lab]).met and completion_for(0, None, [], marked=True).met
    assert not completion_for(0, None, [lab]).met  # no quiz: nothing done by hand yet
