"""A live speculative run whose guesses a student's draft proposer makes ("Use my draft in a live run" under the
draft-proposer exercise).

The engine's speculative decoding takes any draft with `begin`, `propose` and `close`
(inference_core/speculative/drafts.py): the draft here asks the student's `propose(context, k)` in the run's sandbox
(exercises/live_session.py), and the target model verifies its guesses as it verifies the built-in drafts'. Beside
each proposal it records what the built-in prompt-lookup draft proposes for the same context: after each
`spec_round` event come the `student_draft` events of the proposals made until then. The run is greedy, so its
tokens are plain decoding's whatever the draft guesses: a draft only changes how many target passes they take.

Only code that passed every test of the exercise drives a run (the spec's check at `start`, the worker again).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from demos.spec import DemoSpec, ParamSpec, max_prompt_tokens_limit
from inference_core.engine.trace import TraceEvent, event

from .live_run import passed_code
from .live_session import LiveSession, StudentCodeFailed

LIVE_DEMO = "student-draft"
EXERCISE_ID = "draft-proposer"
FUNCTION = "propose"
DEFAULT_PROMPT = "Repeat this sentence exactly: the quick brown fox jumps over the lazy dog."


@event("student_draft")
class StudentDraft(TraceEvent):
    """One proposal of the student's draft beside the built-in prompt-lookup draft's for the same context."""

    proposal: int  # 0, 1, … in the order the engine asked
    context_len: int  # tokens of context the proposal follows (prompt and generated)
    k: int  # the most guesses asked for
    tokens: list[int]  # the student's guesses (what the target verified)
    texts: list[str]
    builtin_tokens: list[int]  # the built-in n-gram draft's guesses for the same context and k
    builtin_texts: list[str]
    same: bool


def check(params: dict) -> None:
    if passed_code(params["submission"], EXERCISE_ID) is None:
        raise ValueError("Only code that passed every test of the draft-proposer exercise can drive a live run: "
                         "press Run tests, and use the run once all the tests pass.")


class SandboxedDraft:
    """A draft (the engine's `Draft` protocol) whose guesses the student's function makes in the sandbox."""

    name = "yours"

    def __init__(self, session: LiveSession, tokenizer, vocab_size: int, lock) -> None:
        self.session, self.tokenizer, self.vocab_size, self.lock = session, tokenizer, vocab_size, lock
        self.proposals: list[dict] = []

    def begin(self, prompt_ids, capacity, sampling, generator) -> None:
        pass

    def close(self) -> None:
        pass

    def propose(self, context_ids: list[int], k: int):
        from inference_core.speculative.drafts import Proposal, ngram_lookup

        builtin = ngram_lookup(list(context_ids), k)
        where = f"at proposal {len(self.proposals) + 1}"
        t0 = time.perf_counter()
        self.lock.release()  # the run's own lock (LiveSamplerRun's pattern): other runs step while the sandbox answers
        try:
            got = self.session.ask([list(context_ids), k], where)
        finally:
            self.lock.acquire()
        if not (isinstance(got, list) and len(got) <= k and all(0 <= t < self.vocab_size for t in got)):
            shown = got.get("repr", got) if isinstance(got, dict) else got
            raise StudentCodeFailed(f"{where.capitalize()} your function returned {shown}: it should return a list "
                                    f"of at most k = {k} token ids, each from 0 to {self.vocab_size - 1}.")
        text = self.tokenizer.token_text
        self.proposals.append(StudentDraft(
            proposal=len(self.proposals), context_len=len(context_ids), k=k, tokens=got,
            texts=[text(t) for t in got], builtin_tokens=builtin, builtin_texts=[text(t) for t in builtin],
            same=got == builtin).to_dict())
        return Proposal(got, None, time.perf_counter() - t0, 0)


class LiveDraftRun:
    """The run's events; like exercises.live_run.LiveSamplerRun it takes the engine's lock around each step itself."""

    needs_engine_lock = False

    def __init__(self, params: dict, should_stop: Callable[[], bool] | None, models) -> None:
        self._events = self._generate(SPEC.with_defaults(params), should_stop, models)

    def __iter__(self) -> Iterator[dict]:
        return self

    def __next__(self) -> dict:
        return next(self._events)

    def close(self) -> None:
        self._events.close()

    def _generate(self, params: dict, should_stop, models) -> Iterator[dict]:
        from inference_core import DEFAULT_MODEL
        from inference_core.speculative.decode import SpecParams
        from inference_core.speculative.speculate import speculate

        code = passed_code(params["submission"], EXERCISE_ID)
        if code is None:
            raise StudentCodeFailed("This submission did not pass the exercise's tests: it cannot drive a run.")
        engine = models.get(params.get("model") or DEFAULT_MODEL)
        spec = SpecParams(k=params["k"], max_new_tokens=params["max_new_tokens"], temperature=0.0)
        prompt_ids = engine.encode_prompt(params["prompt"], params["chat"])
        session = LiveSession(code, FUNCTION)
        try:
            draft = SandboxedDraft(session, engine.tokenizer, engine.config.vocab_size, engine.lock)
            steps = speculate(engine, prompt_ids, draft, spec, should_stop)
            sent = 0
            try:
                while True:
                    with engine.lock:
                        ev = next(steps, None)
                    if ev is None:
                        return
                    yield ev.to_dict()
                    if ev.type == "spec_round":
                        yield from draft.proposals[sent:]
                        sent = len(draft.proposals)
            finally:
                steps.close()
        finally:
            session.close()


def run(params: dict, should_stop: Callable[[], bool] | None = None, *, models) -> LiveDraftRun:
    """Params: submission (a passed submission's id), prompt, chat, k, max_new_tokens. Yields the speculative run's
    events (run_started, spec_started, spec_round…, spec_finished, run_finished) with student_draft events after
    the rounds; raises StudentCodeFailed when the student's code ends the run."""
    return LiveDraftRun(params, should_stop, models)


SPEC = DemoSpec(
    name=LIVE_DEMO,
    title="Your draft in a live run",
    description="Speculative decoding with your draft proposing every guess, beside the built-in prompt lookup's.",
    runner=run,
    check=check,
    module="js/exercises/live-run.js",
    params={
        "submission": ParamSpec("str", label="Your passing submission", max_chars=64),
        "prompt": ParamSpec("str", default=DEFAULT_PROMPT, label="Prompt", max_chars=2000,
                            max_tokens=max_prompt_tokens_limit),
        "chat": ParamSpec("bool", default=True, label="Use the chat template"),
        "k": ParamSpec("int", default=4, label="Tokens drafted per round (k)", min_value=1, max_value=8),
        "max_new_tokens": ParamSpec("int", default=24, label="New tokens", min_value=4, max_value=48),
    },
)
