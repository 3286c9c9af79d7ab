"""A live run whose tokens a student's sampler chooses ("Use my sampler in a live run" under the sampler exercise).

Started on the demo socket like any demo (`student-sampler`, registered by exercises/apps.py among the runs that
pages do not list), queued, run and streamed by the demo worker. The engine calls the request's `chooser` instead
of its own `sample` at every step (inference_core/engine/request.py); the chooser here hands the step's 64 most
likely logits to the student's `sample(logits, temperature, top_k, top_p, u)` in the run's sandbox
(exercises/live_session.py), continues with the token they pick, and records beside it what the engine's own
sampler drew from the same logits: each `token` event is followed by a `student_choice` event.

Only code that passed every test of the exercise drives a run: the spec's check refuses any other submission at
`start`, and the worker reads the code from that passed submission again before it runs.
"""
from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator

from demos.spec import DemoSpec, ParamSpec, max_prompt_tokens_limit
from inference_core.engine.trace import TraceEvent, event

from .live_session import LiveSession, StudentCodeFailed

LIVE_DEMO = "student-sampler"
EXERCISE_ID = "sampler"
FUNCTION = "sample"
CANDIDATES = 64  # the logits the student's function sees each step: the most likely tokens, in token-id order


@event("student_choice")
class StudentChoice(TraceEvent):
    """The token the student's sampler chose at `step` (the one the run continued with) beside the engine's own."""

    step: int
    token_id: int
    text: str
    index: int  # what their function returned: the candidate's place in `logits` (token-id order)
    u: float  # the uniform number it was given
    builtin_token_id: int  # what the engine's sampler drew from the same logits and parameters
    builtin_text: str
    same: bool
    rank: int  # their token's place among the candidates by logit (0: the most likely)
    probability: float  # the model's probability of their token (softmax at temperature 1)
    builtin_probability: float


def passed_code(submission_id: object, exercise_id: str = EXERCISE_ID) -> str | None:
    """The code of `submission_id` if it passed every test of exercise `exercise_id`, else None."""
    from .models import Submission

    try:
        key = uuid.UUID(str(submission_id))
    except ValueError:
        return None
    return (Submission.objects.filter(pk=key, exercise_id=exercise_id, status=Submission.Status.DONE, passed=True)
            .values_list("code", flat=True).first())


def check(params: dict) -> None:
    if passed_code(params["submission"]) is None:
        raise ValueError("Only code that passed every test of the sampler exercise can drive a live run: press "
                         "Run tests, and use the run once all the tests pass.")


class StudentSampler:
    """The request's chooser: the engine calls it with each step's logits instead of its own `sample`."""

    def __init__(self, session: LiveSession, tokenizer, lock, seed: int) -> None:
        self.session, self.tokenizer, self.lock = session, tokenizer, lock
        self.uniform = random.Random(seed)
        self.choices: list[dict] = []

    def __call__(self, logits, params, generator=None, *history) -> int:
        import torch

        from inference_core.model.sampling import sample

        row = logits.float()
        top_values, top_ids = torch.topk(row, CANDIDATES)
        order = torch.argsort(top_ids)  # token-id order: a tie goes to the lower id, as the engine's argmax does
        ids, values = top_ids[order].tolist(), top_values[order].tolist()
        probs = torch.softmax(row, -1)
        builtin = sample(row, params, generator, *history)  # everything from the logits is read before the wait
        u, step = self.uniform.random(), len(self.choices)
        # The engine's lock is this run's (LiveSamplerRun holds it around each engine step): let other runs step
        # while the sandbox answers, so a slow or stuck sampler costs only its own run.
        self.lock.release()
        try:
            got = self.session.ask([values, params.temperature, params.top_k, params.top_p, u], f"at token {step + 1}")
        finally:
            self.lock.acquire()
        if isinstance(got, bool) or not isinstance(got, int) or not 0 <= got < len(ids):
            shown = got.get("repr", got) if isinstance(got, dict) else got
            kind = f" (a {got['type']})" if isinstance(got, dict) and "type" in got else ""
            raise StudentCodeFailed(f"At token {step + 1} your function returned {shown}{kind}: it should return "
                                    f"an index into `logits`, an int from 0 to {len(ids) - 1}.")
        token = ids[got]
        by_logit = sorted(range(len(ids)), key=lambda i: (-values[i], ids[i]))
        self.choices.append(StudentChoice(
            step=step, token_id=token, text=self.tokenizer.token_text(token), index=got, u=round(u, 6),
            builtin_token_id=builtin, builtin_text=self.tokenizer.token_text(builtin), same=token == builtin,
            rank=by_logit.index(got), probability=round(float(probs[token]), 6),
            builtin_probability=round(float(probs[builtin]), 6)).to_dict())
        return token


class LiveSamplerRun:
    """The run's events. It takes the engine's lock itself around each engine step (not the worker, which would
    hold it through the student's answer too)."""

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
        from inference_core.engine.llm_engine import generate_one
        from inference_core.engine.loaded_model import GenerationParams
        from inference_core.engine.request import Request

        code = passed_code(params["submission"])
        if code is None:  # checked at start; read again: the worker runs only what passed
            raise StudentCodeFailed("This submission did not pass the exercise's tests: it cannot drive a run.")
        engine = models.get(params.get("model") or DEFAULT_MODEL)
        seed = params["seed"] if params["seed"] is not None else random.SystemRandom().randrange(2**31)
        gen = GenerationParams(temperature=params["temperature"], top_k=params["top_k"], top_p=params["top_p"],
                               seed=seed, max_new_tokens=params["max_new_tokens"], chat=params["chat"])
        prompt_ids = engine.encode_prompt(params["prompt"], gen.chat)
        session = LiveSession(code, FUNCTION)  # outside the engine's lock: a sandbox's start takes a while
        try:
            sampler = StudentSampler(session, engine.tokenizer, engine.lock, seed)
            yield engine.run_started(prompt_ids, gen, sampler="yours", candidates=CANDIDATES).to_dict()
            request = Request("run", list(prompt_ids), gen, generator=gen.generator(), chooser=sampler)
            steps = generate_one(engine, request, should_stop=should_stop)
            try:
                while True:
                    with engine.lock:
                        ev = next(steps, None)
                    if ev is None:
                        return
                    yield ev.to_dict()
                    if ev.type == "token" and ev.step < len(sampler.choices):
                        yield sampler.choices[ev.step]
            finally:
                steps.close()
        finally:
            session.close()


def run(params: dict, should_stop: Callable[[], bool] | None = None, *, models) -> LiveSamplerRun:
    """Params: submission (a passed submission's id), prompt, chat, temperature, top_k, top_p, max_new_tokens,
    seed. Yields run_started, then token and student_choice per step, then run_finished; raises
    StudentCodeFailed when the student's code ends the run."""
    return LiveSamplerRun(params, should_stop, models)


SPEC = DemoSpec(
    name=LIVE_DEMO,
    title="Your sampler in a live run",
    description="The engine generates with your sampler choosing each token, beside its own sampler's choice.",
    runner=run,
    check=check,
    module="js/exercises/live-run.js",
    params={
        "submission": ParamSpec("str", label="Your passing submission", max_chars=64),
        "prompt": ParamSpec("str", default="Write one sentence about the sea.", label="Prompt", max_chars=2000,
                            max_tokens=max_prompt_tokens_limit),
        "chat": ParamSpec("bool", default=True, label="Use the chat template"),
        "temperature": ParamSpec("float", default=0.0, label="Temperature", min_value=0.0, max_value=1.5),
        "top_k": ParamSpec("int", default=0, label="Top-k (0: off)", min_value=0, max_value=CANDIDATES),
        "top_p": ParamSpec("float", default=1.0, label="Top-p (1: off)", min_value=0.05, max_value=1.0),
        "max_new_tokens": ParamSpec("int", default=16, label="New tokens", min_value=1, max_value=48),
        "seed": ParamSpec("int", default=None, label="Seed", min_value=0, max_value=2**31 - 1, nullable=True),
    },
)
