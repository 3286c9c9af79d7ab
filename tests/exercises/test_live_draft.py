"""A passing draft proposer drives a live speculative run: the real engine verifies the guesses the student's
`propose` makes in a real sandbox, and each proposal is traced beside the built-in prompt-lookup draft's.

Submissions are graded the real way (POST, the `cpu` task at once on the real sandbox); the run is the runner the
worker calls, on the session's loaded models."""
from __future__ import annotations

import pytest
from django.urls import reverse

from demos.registry import DemoParamError, get_spec, validate
from exercises import catalog
from exercises.live_draft import EXERCISE_ID, LIVE_DEMO
from exercises.live_session import StudentCodeFailed

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(300)]

DRAFT = catalog.get(EXERCISE_ID)
PROMPT = "Repeat this sentence exactly: the quick brown fox jumps over the lazy dog."


def graded(client, code: str) -> dict:
    answer = client.post(reverse("exercises:run", args=[DRAFT.id]), {"code": code})
    assert answer.status_code == 202, answer.content
    return client.get(answer.json()["poll"]).json()


def passing(client, code: str) -> str:
    state = graded(client, code)
    assert state["status"] == "done" and state["passed"], state["result"]
    return state["id"]


def live(models, submission: str, **params) -> list[dict]:
    cleaned = validate(LIVE_DEMO, {"submission": submission, "prompt": PROMPT, **params})
    return list(get_spec(LIVE_DEMO).load_runner()(cleaned, models=models))


def test_the_students_draft_guesses_and_the_output_is_plain_decodings(client, eager_worker, loaded_models):
    from inference_core.engine.loaded_model import GenerationParams

    events = live(loaded_models, passing(client, DRAFT.reference), k=4, max_new_tokens=20)
    rounds = [e for e in events if e["type"] == "spec_round"]
    proposals = [e for e in events if e["type"] == "student_draft"]
    assert proposals and all(p["same"] and p["tokens"] == p["builtin_tokens"] for p in proposals)
    drafted = [r["drafted"] for r in rounds if r["drafted"]]
    assert drafted == [p["tokens"][:4] for p in proposals if p["tokens"]]  # the engine verified their guesses
    assert sum(r["n_accepted"] for r in rounds) > 0  # a copied sentence: prompt lookup guesses right
    engine = loaded_models.get()
    plain = engine.generate_ids(engine.encode_prompt(PROMPT, True), GenerationParams(max_new_tokens=20, chat=True))
    assert events[-1]["type"] == "run_finished" and events[-1]["token_ids"] == plain  # greedy: lossless


def test_a_draft_that_guesses_badly_changes_the_rounds_not_the_tokens(client, eager_worker, loaded_models):
    """A draft that passes the tests but guesses token 0 in a live run (whose contexts are long): every guess is
    rejected, the text is still plain decoding's."""
    code = DRAFT.reference + "\n\n_passing = propose\n\n\ndef propose(context, k):\n" \
        "    return [0] * k if len(context) > 12 else _passing(context, k)\n"
    events = live(loaded_models, passing(client, code), k=2, max_new_tokens=8)
    rounds = [e for e in events if e["type"] == "spec_round" and e["drafted"]]
    assert rounds and all(r["n_accepted"] == 0 for r in rounds)
    proposals = [e for e in events if e["type"] == "student_draft"]
    assert proposals and all(p["tokens"] == [0] * p["k"] and not p["same"] for p in proposals)
    engine = loaded_models.get()
    from inference_core.engine.loaded_model import GenerationParams

    plain = engine.generate_ids(engine.encode_prompt(PROMPT, True), GenerationParams(max_new_tokens=8, chat=True))
    assert events[-1]["token_ids"] == plain


def test_only_a_passing_draft_runs_and_bad_answers_end_the_run(client, eager_worker, loaded_models):
    failing = graded(client, DRAFT.starter)
    assert failing["status"] == "done" and not failing["passed"]
    with pytest.raises(DemoParamError, match="passed every test of the draft-proposer exercise"):
        validate(LIVE_DEMO, {"submission": failing["id"]})
    sampler_pass = graded(client, catalog.get("sampler").reference)  # passing, but another exercise's code
    with pytest.raises(DemoParamError):
        validate(LIVE_DEMO, {"submission": sampler_pass["id"]})
    too_many = DRAFT.reference + "\n\n_passing = propose\n\n\ndef propose(context, k):\n" \
        "    return list(range(k + 1)) if len(context) > 12 else _passing(context, k)\n"
    with pytest.raises(StudentCodeFailed, match=r"At proposal 1 your function returned \[0, 1, 2\]: it should "
                                                r"return a list of at most k = 2 token ids"):
        live(loaded_models, passing(client, too_many), k=2, max_new_tokens=4)
