"""A visitor's lab attempt, exercise submissions and finished demo runs become theirs when they sign up or sign in
(courseapp/signals.py, progress.merge_visitor): over HTTP, the lab resumes with its table and answers on another
device, the exercise counts as passed, and a module those complete is complete; an account's own submitted lab is
never replaced by a visitor's draft, and nobody else's work moves."""
from __future__ import annotations

import json

import pytest
from django.test import Client

from courseapp.loader import load_course
from courseapp.models import ModuleProgress
from demos.identity import TOKEN_KEY, token_owner
from demos.models import Run
from exercises import catalog
from exercises.models import Submission
from labs.models import LabAttempt
from lab_helpers import lab_markdown, store_run

pytestmark = pytest.mark.django_db
EXERCISE = "serving-metrics"
PASSWORD = "a-long-password-42"


@pytest.fixture
def practice_course(content_dir):
    """`cache` (no quiz) with a lab and an exercise."""
    path = content_dir / "cache.md"
    path.write_text(path.read_text() + "\n" + lab_markdown() + f"\n:::{{exercise}} {EXERCISE}\n:::\n")
    load_course(content_dir)


def pass_exercise(client: Client) -> None:
    response = client.post(f"/exercises/{EXERCISE}/run/", {"code": catalog.get(EXERCISE).reference})
    assert response.status_code == 202 and client.get(response.json()["poll"]).json()["passed"]


def run_every_row(owner: str, user=None) -> None:
    for quant in (190.0, 170.0, 200.0):
        store_run(owner, "int4-g128", quant, user=user)
    for quant in (140.0, 135.0, 150.0):
        store_run(owner, "int8", quant, user=user)


def save_answers(client: Client, answers: dict) -> None:
    response = client.post("/labs/cache/formats/answers", json.dumps({"answers": answers}),
                           content_type="application/json")
    assert response.status_code == 200


def lab_state(client: Client) -> dict:
    response = client.get("/labs/cache/formats/table")
    assert response.status_code == 200
    return response.json()


def signed_in_elsewhere(username: str) -> Client:
    """Another device: a fresh browser that signs in with the password."""
    device = Client()
    assert device.post("/accounts/login/", {"username": username, "password": PASSWORD}).status_code == 302
    return device


def test_sign_up_takes_the_visitor_s_lab_runs_and_exercise_to_the_account(practice_course, worker, client):
    pass_exercise(client)
    owner = token_owner(client.session[TOKEN_KEY])
    run_every_row(owner)
    going = store_run(owner, "int8", 0.0, status=Run.Status.RUNNING)
    save_answers(client, {"speedup": "4.1", "why": "fewer bytes to read"})
    assert client.post("/modules/cache/complete/").status_code == 302  # not complete: the lab is not submitted
    stranger = Client()
    pass_exercise(stranger)

    response = client.post("/accounts/signup/", {"username": "newbie", "password1": PASSWORD,
                                                 "password2": PASSWORD})
    assert response.status_code == 302
    other_device = signed_in_elsewhere("newbie")
    user_id = other_device.session["_auth_user_id"]
    state = lab_state(other_device)
    assert state["attempt"]["answers"] == {"speedup": "4.1", "why": "fewer bytes to read"}
    assert state["table"]["complete"] and not state["attempt"]["submitted_at"]  # its runs came along
    assert Submission.objects.filter(owner=f"u:{user_id}", passed=True).count() == 1
    assert Submission.objects.exclude(owner=f"u:{user_id}").count() == 1  # the stranger's stays theirs
    going.refresh_from_db()
    assert going.owner == owner  # a run still going keeps the owner its socket knows
    page = other_device.get("/").content.decode()
    assert "1 of 2 labs and exercises done" in page

    answers = json.dumps({"answers": {"bytes": "int4"}})
    response = other_device.post("/labs/cache/formats/submit", answers, content_type="application/json")
    assert response.status_code == 200 and response.json()["attempt"]["submitted_at"]
    assert other_device.post("/modules/cache/complete/").status_code == 302
    assert ModuleProgress.objects.get(user_id=user_id, module__slug="cache").completed


def test_sign_in_keeps_the_account_s_submitted_lab_over_a_visitor_s_draft(practice_course, client,
                                                                          django_user_model):
    user = django_user_model.objects.create_user("regular", password=PASSWORD)
    account = signed_in_elsewhere("regular")
    run_every_row(f"u:{user.pk}", user)
    response = account.post("/labs/cache/formats/submit", json.dumps({"answers": {"speedup": "4.0"}}),
                            content_type="application/json")
    assert response.status_code == 200
    save_answers(client, {"speedup": "9.9"})  # a visitor on another browser, then signing in there
    assert client.post("/accounts/login/", {"username": "regular", "password": PASSWORD}).status_code == 302
    assert lab_state(client)["attempt"]["answers"] == {"speedup": "4.0"}
    assert LabAttempt.objects.count() == 1  # the draft did not stay behind as a visitor's row


def test_sign_in_takes_a_visitor_s_submitted_lab_over_the_account_s_unsubmitted_one(practice_course, client,
                                                                                   django_user_model):
    user = django_user_model.objects.create_user("regular", password=PASSWORD)
    save_answers(signed_in_elsewhere("regular"), {"speedup": "1.0"})
    save_answers(client, {"speedup": "4.1"})
    session = client.session
    session[TOKEN_KEY] = "the-visitor-s-token"  # as their first demo run's socket makes it (demos/identity.py)
    session.save()
    run_every_row(token_owner("the-visitor-s-token"))
    assert client.post("/labs/cache/formats/submit", b"", content_type="application/json").status_code == 200
    assert client.post("/accounts/login/", {"username": "regular", "password": PASSWORD}).status_code == 302
    attempt = LabAttempt.objects.get()
    assert attempt.user == user and attempt.submitted_at and attempt.answers == {"speedup": "4.1"}
    assert lab_state(signed_in_elsewhere("regular"))["attempt"]["submitted_at"]
