"""Grading a lab against the student's own runs, through its endpoints: a right and a wrong ratio and choice with
feedback in their numbers, answers saved on every change and resumed on another device, submit refused until
every row has its runs and then scored once, CSRF as on the rest of the site."""
from __future__ import annotations

import json

import pytest
from django.test import Client

from courseapp.models import Module, Track
from labs.grading import grade, parse_number
from labs.models import LabAttempt, replace_labs
from labs.table import lab_table
from lab_helpers import make_lab, store_run

pytestmark = pytest.mark.django_db
URL = "/labs/quant/formats/"


@pytest.fixture
def lab(db) -> dict:
    track = Track.objects.create(slug="t", title="T")
    module = Module.objects.create(slug="quant", title="Quant", track=track, draft=False, source="x")
    definition = make_lab()
    replace_labs(module, [definition])
    return definition


@pytest.fixture
def signed_in(student) -> Client:
    client = Client()
    client.force_login(student)
    return client


def run_everything(owner: str, user=None) -> None:
    """Three runs of each row: int4 190 (170–200) tok/s beside fp32 46 (44–48), int8 140."""
    for quant, fp32 in ((190.0, 46.0), (170.0, 44.0), (200.0, 48.0)):
        store_run(owner, "int4-g128", quant, fp32_tps=fp32, user=user)
    for quant in (140.0, 135.0, 150.0):
        store_run(owner, "int8", quant, user=user)


def post(client: Client, name: str, answers: dict | None = None):
    body = json.dumps({"answers": answers}) if answers is not None else ""
    return client.post(URL + name, body, content_type="application/json")


def test_a_right_and_a_wrong_answer_are_graded_against_the_students_own_runs(lab, signed_in, student):
    run_everything(f"u:{student.pk}", student)
    store_run("u:999", "int4-g128", 900.0, fp32_tps=10.0)  # another student's: it moves nothing here
    feedback = post(signed_in, "answers", {"speedup": "4.1", "bytes": "int8"}).json()["attempt"]["feedback"]
    # 190 / 46 = 4.13; the runs allow 170/48 = 3.54 to 200/44 = 4.55.
    assert feedback["speedup"]["correct"] is True
    assert feedback["speedup"]["message"].startswith(
        "Your int4-g128 median, 190 tok/s, over fp32's 46.0 tok/s is 4.13×; your runs allow 3.54–4.55×")
    assert feedback["bytes"]["correct"] is False
    assert "int4-g128 has the lowest weight bytes read per token in your runs: 72.0 MB" in feedback["bytes"]["message"]
    assert "you chose int8, 135 MB" in feedback["bytes"]["message"]
    wrong = post(signed_in, "answers", {"speedup": "2", "bytes": "int4"}).json()["attempt"]["feedback"]
    assert wrong["speedup"]["correct"] is False and "2× is outside that range" in wrong["speedup"]["message"]
    assert wrong["bytes"]["correct"] is True
    assert wrong["why"] == {"correct": None, "message": "Not answered yet."}


def test_answers_are_saved_as_they_go_and_resume_on_another_device(lab, signed_in, student):
    post(signed_in, "answers", {"speedup": "3.9", "why": "Fewer bytes per token."})
    other_device = Client()
    other_device.force_login(student)
    attempt = other_device.get(URL + "table").json()["attempt"]
    assert attempt["answers"] == {"speedup": "3.9", "why": "Fewer bytes per token."}
    assert attempt["submitted_at"] is None
    # Not graded yet: no runs of its rows, and the feedback says so rather than marking it wrong.
    assert attempt["feedback"]["speedup"] == {
        "correct": None, "message": "Run int4-g128 and fp32 first: this is graded against your own runs."}


def test_a_visitor_resumes_in_their_session_and_nowhere_else(lab):
    visitor = Client()
    post(visitor, "answers", {"speedup": "4"})
    assert visitor.get(URL + "table").json()["attempt"]["answers"] == {"speedup": "4"}
    assert Client().get(URL + "table").json()["attempt"]["answers"] == {}


def test_submit_is_refused_naming_the_rows_left_until_every_row_has_its_runs(lab, signed_in, student):
    for quant in (190.0, 170.0, 200.0):
        store_run(f"u:{student.pk}", "int4-g128", quant)
    store_run(f"u:{student.pk}", "int8", 140.0)
    refused = post(signed_in, "submit", {"speedup": "4.1"})
    assert refused.status_code == 400
    assert refused.json()["error"] == "Run every configuration 3 times before submitting: int8 has 1 of 3."
    assert refused.json()["attempt"]["answers"] == {"speedup": "4.1"}  # kept all the same
    assert LabAttempt.objects.get().submitted_at is None


def test_a_complete_lab_is_scored_once_and_then_locked(lab, signed_in, student):
    run_everything(f"u:{student.pk}", student)
    done = post(signed_in, "submit", {"speedup": "4.1", "bytes": "int8", "why": "bytes"})
    assert done.status_code == 200
    attempt = done.json()["attempt"]
    assert attempt["score"] == 0.5 and attempt["submitted_at"]  # one of the two graded questions right
    stored = LabAttempt.objects.get()
    assert stored.feedback["table"]["rows"][2]["stats"]["decode_tokens_per_s"]["median"] == 190.0
    store_run(f"u:{student.pk}", "int4-g128", 400.0)  # a re-run later changes the table, not the grade
    again = post(signed_in, "submit", {"speedup": "9"})
    assert again.status_code == 409 and again.json()["attempt"]["score"] == 0.5
    assert post(signed_in, "answers", {"speedup": "9"}).status_code == 409
    assert LabAttempt.objects.get().answers["speedup"] == "4.1"


def test_posting_needs_the_csrf_token_and_known_questions(lab, student):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(student)
    assert post(strict, "answers", {"speedup": "4"}).status_code == 403
    client = Client()
    client.force_login(student)
    unknown = post(client, "answers", {"colour": "red"})
    assert unknown.status_code == 400 and "no question 'colour'" in unknown.json()["error"]
    assert client.get("/labs/quant/other/table").status_code == 404


def test_an_argmax_whose_runs_overlap_the_best_one_accepts_both():
    lab = make_lab(questions=[{"id": "fast", "kind": "argmax", "text": "Fastest?"}])
    table = {"metrics": {"decode_tokens_per_s": {"label": "speed", "unit": "tok/s"}}, "rows": [
        {"id": "a", "label": "A", "stats": {"decode_tokens_per_s": {"median": 100.0, "min": 90.0, "max": 110.0}}},
        {"id": "b", "label": "B", "stats": {"decode_tokens_per_s": {"median": 95.0, "min": 92.0, "max": 105.0}}},
        {"id": "c", "label": "C", "stats": {"decode_tokens_per_s": {"median": 40.0, "min": 39.0, "max": 41.0}}}]}
    assert grade(lab, table, {"fast": "b"})["fast"]["correct"] is True
    assert grade(lab, table, {"fast": "c"})["fast"]["correct"] is False
    assert "Your runs of B overlap it" in grade(lab, table, {"fast": "a"})["fast"]["message"]


def test_a_typed_number_stands_for_its_rounding():
    assert parse_number("4.1") == pytest.approx((4.1, 0.05))
    assert parse_number(" 4,10× ") == pytest.approx((4.1, 0.005))
    assert parse_number("4") == (4.0, 0.5)
    assert parse_number("four") is None and parse_number("4.1.2") is None


def test_the_table_endpoint_reads_no_runs_and_makes_no_session_for_a_new_visitor(lab):
    client = Client()
    response = client.get(URL + "table")
    assert response.status_code == 200 and "sessionid" not in response.cookies
    assert all(row["runs"] == 0 for row in response.json()["table"]["rows"])
    assert lab_table(lab, ())["complete"] is False
