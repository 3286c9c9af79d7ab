"""The exercise pages over HTTP: Run tests → 202 → poll → graded results (real task, real sandbox), who may read a
run, the limits (code size, 1,000 presses in a minute, a lost run, a broker that is down) and the widget's markup."""
from __future__ import annotations

import json
import re
import statistics
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.staticfiles import finders
from django.test import Client
from django.urls import reverse

from exercises import catalog
from exercises.embed import exercise_embed_html
from exercises.grading import shown_input
from exercises.models import Submission

pytestmark = pytest.mark.django_db
KV = catalog.get("kv-cache-bytes")
RUN = reverse("exercises:run", args=[KV.id])


def csrf_client() -> tuple[Client, str]:
    """A browser-like client (CSRF enforced) that opened the exercise page, and the token the page gave it."""
    client = Client(enforce_csrf_checks=True)
    page = client.get(reverse("exercises:page", args=[KV.id])).content.decode()
    return client, re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)


def press_run(client: Client, token: str, code: str):
    return client.post(RUN, {"code": code}, HTTP_X_CSRFTOKEN=token)


def result_of(client: Client, answer) -> dict:
    assert answer.status_code == 202, answer.content
    state = client.get(answer.json()["poll"]).json()
    assert state["status"] == "done", state
    return state


def test_run_then_poll_gives_each_test_s_result(eager_worker):
    client, token = csrf_client()
    state = result_of(client, press_run(client, token, KV.reference))
    result = state["result"]
    assert state["passed"] and result["passed"] and result["n_passed"] == result["n_tests"] == len(KV.cases)
    visible = [t for t in result["tests"] if not t["hidden"]]
    assert visible[0] == {"name": KV.cases[0].name, "hidden": False, "passed": True, "message": "",
                          "input": "kv_cache_bytes({'num_hidden_layers': 32, 'num_attention_heads': 32, "
                                   "'num_key_value_heads': 8, 'hidden_size': 4096}, 1)",
                          "expected": "131072", "got": "131072"}
    hidden = [t for t in result["tests"] if t["hidden"]]
    assert len(hidden) == len(KV.hidden) and all(set(t) == {"name", "hidden", "passed", "message"} for t in hidden)
    submission = Submission.objects.get()
    assert submission.owner.startswith("s:") and submission.user is None and submission.passed
    assert len(eager_worker) == 1


def test_a_wrong_answer_shows_input_expected_got_and_why(eager_worker):
    client, token = csrf_client()
    state = result_of(client, press_run(client, token, KV.starter))
    first = state["result"]["tests"][0]
    assert not state["passed"] and not first["passed"]
    assert first["expected"] == "131072" and first["got"] == "262144"
    assert "num_key_value_heads" in first["message"]
    body = json.dumps(state)
    for case in KV.hidden:  # as the page would write it, or as JSON
        assert shown_input(case) not in body and json.dumps(case.call["args"]) not in body


def test_only_its_owner_reads_a_run(eager_worker):
    client, token = csrf_client()
    poll = press_run(client, token, KV.reference).json()["poll"]
    assert client.get(poll).status_code == 200
    assert Client().get(poll).status_code == 404  # another visitor
    someone = User.objects.create_user("someone", password="x")
    other = Client()
    other.force_login(someone)
    assert other.get(poll).status_code == 404


def test_signed_in_student_owns_the_run_and_gets_their_code_back(eager_worker):
    student = User.objects.create_user("student", password="x")
    client = Client()
    client.force_login(student)
    code = KV.reference + "\n# my version\n"
    result_of(client, client.post(RUN, {"code": code}))
    submission = Submission.objects.get()
    assert submission.user == student and submission.owner == f"u:{student.pk}"
    page = client.get(reverse("exercises:page", args=[KV.id])).content.decode()
    assert "# my version" in page


def test_code_size_and_bad_requests(idle_worker):
    client = Client()
    limit = 20_000
    assert client.post(RUN, {"code": "x" * (limit + 1)}).status_code == 413
    assert client.post(RUN, {}).status_code == 400
    assert client.post(reverse("exercises:run", args=["no-such-exercise"]), {"code": "x"}).status_code == 404
    assert client.get(RUN).status_code == 405
    assert Client(enforce_csrf_checks=True).post(RUN, {"code": "x"}).status_code == 403
    assert Submission.objects.count() == 0 and idle_worker == []


def test_a_thousand_presses_in_a_minute_are_refused_fast_and_others_still_run(eager_worker):
    client, token = csrf_client()
    statuses, refusal_times, retry_after = [], [], set()
    for _ in range(1000):
        t0 = time.perf_counter()
        answer = press_run(client, token, KV.reference)
        statuses.append(answer.status_code)
        if answer.status_code == 429:
            refusal_times.append(time.perf_counter() - t0)
            retry_after.add(int(answer["Retry-After"]))
            assert answer.json()["error"] == "too_many_runs"
    assert statuses.count(202) == 20 and statuses.count(429) == 980
    assert Submission.objects.count() == 20 and len(eager_worker) == 20  # a refusal writes and queues nothing
    assert all(1 <= wait <= 60 for wait in retry_after)
    assert statuses[:20] == [202] * 20
    assert statuses[20:] == [429] * 980
    assert statistics.median(refusal_times) < 0.1, statistics.median(refusal_times)
    other, other_token = csrf_client()
    assert result_of(other, press_run(other, other_token, KV.reference))["passed"]


def test_one_run_at_a_time_per_student(idle_worker):
    client, token = csrf_client()
    assert press_run(client, token, "a = 1").status_code == 202
    assert press_run(client, token, "a = 2").status_code == 202  # two may wait (EXERCISE_ACTIVE_PER_OWNER)
    third = press_run(client, token, "a = 3")
    assert third.status_code == 429 and third.json()["error"] == "run_in_progress" and third["Retry-After"] == "1"


def test_a_run_no_worker_took_is_reported_lost(idle_worker):
    client, token = csrf_client()
    poll = press_run(client, token, KV.reference).json()["poll"]
    assert client.get(poll).json()["status"] == "queued"
    Submission.objects.update(created_at=Submission.objects.get().created_at - timedelta(seconds=61))
    state = client.get(poll).json()
    assert state["status"] == "error" and "No test runner finished this run within 60 s" in state["result"]["problem"]
    assert press_run(client, token, KV.reference).status_code == 202  # the lost run no longer holds a slot


def test_broker_down_is_a_503_and_no_run_left_waiting(monkeypatch):
    def down(*args, **kwargs):
        raise ConnectionError("redis is down")

    monkeypatch.setattr("exercises.jobs.app.send_task", down)
    client, token = csrf_client()
    answer = press_run(client, token, KV.reference)
    assert answer.status_code == 503 and answer.json()["error"] == "no_workers" and answer["Retry-After"] == "30"
    assert Submission.objects.get().status == Submission.Status.ERROR


def test_page_markup_is_labelled_and_holds_no_hidden_input():
    page = Client().get(reverse("exercises:page", args=[KV.id])).content.decode()
    label = '<label class="exercise-label" id="exercise-kv-cache-bytes-label" for="exercise-kv-cache-bytes-code">'
    assert label in page and 'id="exercise-kv-cache-bytes-code" name="code"' in page
    assert 'role="status" aria-live="polite"' in page and "<caption>Test results for" in page
    assert '<th scope="col">Expected</th>' in page and "Run tests</button>" in page
    assert 'type="module" src="/static/js/exercises/exercise.js"' in page
    assert "def kv_cache_bytes(config, seq_len, batch_size=1, bytes_per_value=2):" in page
    for case in KV.hidden:
        assert shown_input(case) not in page and json.dumps(case.call["args"]) not in page
    assert "sessionid" not in Client().get(reverse("exercises:page", args=[KV.id])).cookies  # no session made
    index = Client().get(reverse("exercises:index")).content.decode()
    assert all(reverse("exercises:page", args=[e]) in index for e in catalog.EXERCISES)
    assert Client().get(reverse("exercises:page", args=["nope"])).status_code == 404


def test_embed_for_the_lesson_renderer(rf):
    html = exercise_embed_html("sampler")
    assert 'data-exercise="sampler"' in html and "csrfmiddlewaretoken" not in html  # cached lessons: no token
    assert 'id="exercise-sampler-starter" type="application/json"' in html
    with_request = exercise_embed_html("sampler", request=rf.get("/"))
    assert 'name="csrfmiddlewaretoken"' in with_request
    with pytest.raises(KeyError, match="no exercise 'nope'"):
        exercise_embed_html("nope")


def test_the_editor_bundle_is_vendored_with_what_the_page_imports():
    bundle = Path(finders.find("vendor/codemirror/codemirror.min.js"))
    script = Path(finders.find("js/exercises/exercise.js"))
    assert (script.parent / "../../vendor/codemirror/codemirror.min.js").resolve() == bundle.resolve()
    assert (bundle.parent / "LICENSE").exists() and "esbuild" in (bundle.parent / "README.md").read_text()
    exports = re.search(r"export\s*\{([^}]*)\}\s*;?\s*$", bundle.read_text()).group(1)
    exported = {part.split(" as ")[-1].strip() for part in exports.split(",")}
    used = set(re.findall(r"\bcm\.(\w+)", script.read_text()))
    assert used and used <= exported, used - exported
    assert str(settings.BASE_DIR / "static") in str(bundle)
