"""The endpoints a lesson's lab talks to (JSON): the student's table, saving and checking answers, submitting.

CSRF as everywhere on the site: the page's script sends the token in `X-CSRFToken`. Runs are read for the request's
demo owners (a signed-in user's on any device, a visitor's in their session) and answers are kept per learner
(courseapp.progress.Learner: the user, or the visitor id in the session), so a lab resumes wherever that holds.
"""
from __future__ import annotations

from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from courseapp.input_limits import loads
from courseapp.models import Module
from courseapp.progress import Learner, settle
from demos.identity import TOKEN_KEY, owners_for_request

from .grading import AnswerError, clean_answers, grade, score
from .models import Lab, LabAttempt
from .table import lab_table

MAX_BODY_BYTES = 32_768  # ten answers of 2,000 characters, with room for the JSON around them


def _lab_or_404(request, slug: str, lab_id: str) -> tuple[Module, dict]:
    module = get_object_or_404(Module.objects.visible_to(request.user), slug=slug)
    lab = Lab.objects.filter(module=module, key=lab_id).first()
    if lab is None:
        raise Http404("This module has no such lab")
    return module, lab.definition


def _run_owners(request) -> tuple[str, ...]:
    """Whose runs count as this student's, creating nothing: a visitor who never ran a demo has none."""
    if not request.user.is_authenticated and not request.session.get(TOKEN_KEY):
        return ()
    return owners_for_request(request)


def _attempt(request, module: Module, lab_id: str, *, create: bool) -> LabAttempt | None:
    learner = Learner.from_request(request, create=create)
    if not learner.known:
        return None
    if create:
        return LabAttempt.objects.get_or_create(module=module, lab_key=lab_id, **learner.owner())[0]
    return LabAttempt.objects.for_learner(learner).filter(module=module, lab_key=lab_id).first()


def _attempt_json(lab: dict, table: dict, attempt: LabAttempt | None) -> dict:
    """What the page shows of an attempt: a submitted one's grade as it was given, else today's feedback."""
    if attempt is None:
        return {"answers": {}, "feedback": grade(lab, table, {}), "submitted_at": None, "score": None}
    feedback = attempt.feedback.get("questions") if attempt.submitted_at else grade(lab, table, attempt.answers)
    return {"answers": attempt.answers, "feedback": feedback,
            "submitted_at": attempt.submitted_at.isoformat() if attempt.submitted_at else None,
            "score": attempt.score}


def _error(message: str, status: int = 400, **extra) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


def _posted_answers(request, lab: dict) -> dict | None:
    """The answers in the request's JSON body ({"answers": {...}}), None when it sends none; AnswerError if bad."""
    if not request.body:
        return None
    try:
        body = loads(request.body, max_bytes=MAX_BODY_BYTES)
    except ValueError as exc:
        raise AnswerError(f"the request is not JSON this lab can read ({exc})") from None
    if not isinstance(body, dict):
        raise AnswerError("send a JSON object: {\"answers\": {question id: answer}}")
    return clean_answers(lab, body["answers"]) if "answers" in body else None


@require_GET
def table(request, slug: str, lab_id: str):
    module, lab = _lab_or_404(request, slug, lab_id)
    rows = lab_table(lab, _run_owners(request))
    return JsonResponse({"table": rows, "attempt": _attempt_json(lab, rows, _attempt(request, module, lab_id,
                                                                                      create=False))})


@require_POST
def answers(request, slug: str, lab_id: str):
    """Save the answers (every change: the lab resumes from them) and grade them against today's table."""
    module, lab = _lab_or_404(request, slug, lab_id)
    try:
        posted = _posted_answers(request, lab)
    except AnswerError as exc:
        return _error(str(exc))
    if posted is None:
        return _error("send the answers: {\"answers\": {question id: answer}}")
    attempt = _attempt(request, module, lab_id, create=True)
    rows = lab_table(lab, _run_owners(request))
    if attempt.submitted_at:
        return _error("This lab is submitted: its answers can no longer change.", 409,
                      table=rows, attempt=_attempt_json(lab, rows, attempt))
    attempt.answers = posted
    attempt.save(update_fields=["answers", "updated_at"])
    return JsonResponse({"table": rows, "attempt": _attempt_json(lab, rows, attempt)})


@require_POST
def submit(request, slug: str, lab_id: str):
    """Grade once every row has its runs; refused, naming the rows left, until then. Submitted once."""
    module, lab = _lab_or_404(request, slug, lab_id)
    try:
        posted = _posted_answers(request, lab)
    except AnswerError as exc:
        return _error(str(exc))
    attempt = _attempt(request, module, lab_id, create=True)
    rows = lab_table(lab, _run_owners(request))
    if attempt.submitted_at:
        return _error("This lab is already submitted.", 409, table=rows, attempt=_attempt_json(lab, rows, attempt))
    if posted is not None:
        attempt.answers = posted
    if not rows["complete"]:
        attempt.save(update_fields=["answers", "updated_at"])
        left = ", ".join(f"{m['label']} has {m['runs']} of {lab['repeats']}" for m in rows["missing"])
        return _error(f"Run every configuration {lab['repeats']} times before submitting: {left}.",
                      missing=rows["missing"], table=rows, attempt=_attempt_json(lab, rows, attempt))
    feedback = grade(lab, rows, attempt.answers)
    attempt.feedback = {"questions": feedback, "table": rows}
    attempt.score = score(lab, feedback)
    attempt.submitted_at = timezone.now()
    attempt.save()
    settle(Learner.from_request(request), module, _run_owners(request))  # the module is complete if all else is done
    return JsonResponse({"table": rows, "attempt": _attempt_json(lab, rows, attempt)})
