"""A passing sampler drives a live run: the real engine calls the student's function in a real sandbox each step.

Submissions are graded the real way (POST to the exercise, the `cpu` task run at once on the real sandbox), so
"passed" is what the server decided; the run is the demo runner the worker calls, on the session's loaded models.
Bad code that passes the tests but misbehaves only in a live run (where `logits` holds 64 candidates, never more
than 5 in the tests) ends its run with a clear message, quickly, and the next run is served.
"""
from __future__ import annotations

import time

import pytest
from django.urls import reverse

from demos.registry import DemoParamError, get_spec, validate
from exercises import catalog
from exercises.live_run import CANDIDATES, LIVE_DEMO
from exercises.live_session import StudentCodeFailed

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(300)]

SAMPLER = catalog.get("sampler")
PROMPT = "Name three colours."


def only_live(misbehaviour: str) -> str:
    """The reference solution, except when it sees a live run's candidates."""
    body = "\n".join("        " + line for line in misbehaviour.splitlines())
    return (SAMPLER.reference + "\n\n_passing = sample\n\n\ndef sample(logits, temperature, top_k, top_p, u):\n"
            f"    if len(logits) == {CANDIDATES}:\n{body}\n    return _passing(logits, temperature, top_k, top_p, u)\n")


def graded(client, code: str) -> dict:
    """Run tests on `code` as the page does; the final state."""
    answer = client.post(reverse("exercises:run", args=[SAMPLER.id]), {"code": code})
    assert answer.status_code == 202, answer.content
    return client.get(answer.json()["poll"]).json()


def passing(client, code: str) -> str:
    state = graded(client, code)
    assert state["status"] == "done" and state["passed"], state["result"]
    return state["id"]


def live(models, submission: str, **params) -> list[dict]:
    """The run's events, from the runner the worker calls (the spec registered by the exercises app)."""
    cleaned = validate(LIVE_DEMO, {"submission": submission, "prompt": PROMPT, **params})
    return list(get_spec(LIVE_DEMO).load_runner()(cleaned, models=models))


def test_a_greedy_sampler_drives_the_run_token_for_token_as_the_engine(client, eager_worker, loaded_models):
    from inference_core.engine.loaded_model import GenerationParams

    submission = passing(client, SAMPLER.reference)
    events = live(loaded_models, submission, temperature=0.0, max_new_tokens=12)
    types = [e["type"] for e in events]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    tokens = [e for e in events if e["type"] == "token"]
    choices = [e for e in events if e["type"] == "student_choice"]
    assert len(tokens) == len(choices) == events[-1]["n_generated"] > 0
    engine = loaded_models.get()
    own = engine.generate_ids(engine.encode_prompt(PROMPT, True), GenerationParams(max_new_tokens=12, chat=True))
    assert [t["token_id"] for t in tokens] == events[-1]["token_ids"] == own
    for token, choice in zip(tokens, choices):
        assert choice["token_id"] == token["token_id"] == choice["builtin_token_id"] and choice["same"]
        assert choice["rank"] == 0 and 0 <= choice["index"] < CANDIDATES
    assert events[0]["params"]["sampler"] == "yours"


def test_a_sampling_run_shows_both_choices_and_follows_the_students(client, eager_worker, loaded_models):
    submission = passing(client, SAMPLER.reference)
    events = live(loaded_models, submission, temperature=1.2, top_k=40, top_p=0.95, seed=7, max_new_tokens=10)
    tokens = [e["token_id"] for e in events if e["type"] == "token"]
    choices = [e for e in events if e["type"] == "student_choice"]
    assert [c["token_id"] for c in choices] == tokens  # the run went on with the student's tokens
    assert all(0.0 <= c["u"] < 1.0 and c["rank"] < 40 for c in choices)  # their top-k held
    again = live(loaded_models, submission, temperature=1.2, top_k=40, top_p=0.95, seed=7, max_new_tokens=10)
    assert [e for e in again if e["type"] == "student_choice"] == choices  # the seed fixes u and the draws


def test_only_code_that_passed_can_drive_a_run(client, eager_worker):
    state = graded(client, SAMPLER.starter)
    assert state["status"] == "done" and not state["passed"]
    for submission in (state["id"], "00000000-0000-0000-0000-000000000000", "not a uuid"):
        with pytest.raises(DemoParamError) as refused:
            validate(LIVE_DEMO, {"submission": submission})
        assert refused.value.code == "invalid_param" and "passed every test" in refused.value.message
    with pytest.raises(DemoParamError):
        validate(LIVE_DEMO, {})  # no submission at all


BAD = {
    "endless loop": ("while True:\n    pass", "did not answer within 1 s at token 1 (an endless loop?)"),
    "crash": ("raise KeyError('boom')", "raised KeyError (line 39) at token 1: 'boom'"),
    "wrong type": ("return 'the best one'", "returned 'the best one' (a str): it should return an index into "
                                              "`logits`, an int from 0 to 63"),
    "out of range": ("return 64", "returned 64: it should return an index into `logits`, an int from 0 to 63"),
    "fork bomb": ("import os\nwhile True:\n    os.fork()", "raised PermissionError (line 41) at token 1"),
    "10 GB": ("hoard = bytearray(10 * 2**30)", "raised MemoryError (line 39) at token 1"),
    "100 MB of output": ("import os\nos.write(1, b'x' * 100 * 2**20)", "wrote more than 256 KB of output at token 1"),
    "a socket": ("import socket\nsocket.create_connection(('127.0.0.1', 80))", "raised PermissionError (line 40)"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_code_in_a_live_run_ends_it_with_a_clear_message(client, eager_worker, loaded_models, name):
    misbehaviour, message = BAD[name]
    submission = passing(client, only_live(misbehaviour))  # the tests' 5 logits never trip it
    t0 = time.monotonic()
    with pytest.raises(StudentCodeFailed) as failed:
        live(loaded_models, submission, max_new_tokens=4)
    assert message in str(failed.value)
    assert time.monotonic() - t0 < 15
    good = passing(client, SAMPLER.reference)  # the engine serves the next run as before
    assert live(loaded_models, good, max_new_tokens=2)[-1]["finish_reason"] == "length"



@pytest.mark.django_db(transaction=True)  # the stuck run's thread reads the submission on its own connection
def test_a_sampler_that_hangs_holds_up_no_other_run(client, eager_worker, loaded_models):
    """While the engine waits for a stuck sampler's answer, the engine's lock is free: another run steps meanwhile.
    The stuck run needs the lock back to end, so holding it past the 1 s answer limit keeps that run from ending."""
    import threading

    from inference_core.engine.loaded_model import GenerationParams

    submission = passing(client, only_live("while True:\n    pass"))
    engine = loaded_models.get()
    failed: list[str] = []

    def stuck_run():
        try:
            live(loaded_models, submission, max_new_tokens=4)
        except StudentCodeFailed as exc:
            failed.append(str(exc))

    stuck = threading.Thread(target=stuck_run)
    stuck.start()
    deadline = time.monotonic() + 60
    while not engine.lock.locked():  # its prefill: the forward, then the question to the sandbox
        assert stuck.is_alive() and time.monotonic() < deadline, failed
        time.sleep(0.001)
    with engine.lock:  # taken as soon as the stuck run waits for its sampler, as another student's run would
        ids = engine.generate_ids(engine.encode_prompt(PROMPT, True), GenerationParams(max_new_tokens=2))
        time.sleep(1.5)  # past the answer limit: the stuck run is over, but cannot end without the lock
        assert len(ids) == 2 and stuck.is_alive() and failed == []
    stuck.join(30)
    assert failed and "did not answer within 1 s" in failed[0]


def test_no_page_lists_the_live_runs(client):
    from demos.registry import DEMOS

    from exercises.live_draft import LIVE_DEMO as DRAFT_DEMO

    for name in (LIVE_DEMO, DRAFT_DEMO):
        assert name not in DEMOS and get_spec(name).name == name  # the socket starts it, by name
        assert client.get(f"/demos/{name}/").status_code == 404
        assert name not in client.get("/demos/").content.decode()
