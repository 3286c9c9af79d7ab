"""Learner progress for signed-in users and anonymous visitors (kept in the session, merged on login), and
`settle`, which applies the completion rule (courseapp/completion.py) and records when it was first met.

An anonymous visitor has no visitor id, no session and no progress row until they act: answer a quiz, complete
a module, or save a place (audio position while listening, or the section they scrolled to). Only an action
passes `create=True`; page views read, and record a visit only for a learner who already has an id."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from demos.models import Run
from exercises.models import Submission
from labs.models import LabAttempt

from .completion import Completion, completion_for
from .models import ModuleProgress, QuizAttempt
from .practice import practice_by_module

VISITOR_SESSION_KEY = "courseapp_visitor"
AUTOPLAY_SESSION_KEY = "courseapp_autoplay"


@dataclass(frozen=True)
class Learner:
    """Whoever is learning: a user, or an anonymous visitor id stored in the session."""

    user: object | None
    visitor: str

    @classmethod
    def from_request(cls, request, *, create: bool = False) -> "Learner":
        if request.user.is_authenticated:
            return cls(user=request.user, visitor="")
        visitor = request.session.get(VISITOR_SESSION_KEY, "")
        if not visitor and create:
            visitor = uuid.uuid4().hex
            request.session[VISITOR_SESSION_KEY] = visitor
        return cls(user=None, visitor=visitor)

    @property
    def known(self) -> bool:
        return self.user is not None or bool(self.visitor)

    def owner(self) -> dict:
        return {"user": self.user, "visitor": self.visitor}


def progress_by_module(learner: Learner) -> dict[int, ModuleProgress]:
    return {p.module_id: p for p in ModuleProgress.objects.for_learner(learner)}


def get_progress(learner: Learner, module) -> ModuleProgress | None:
    return ModuleProgress.objects.for_learner(learner).filter(module=module).first()


def touch(learner: Learner, module) -> ModuleProgress:
    """Record a visit (updates `visited_at`, which drives "resume where you left off")."""
    progress, created = ModuleProgress.objects.get_or_create(module=module, **learner.owner())
    if not created:
        progress.save(update_fields=["visited_at"])
    return progress


def learner_owners(learner: Learner) -> tuple[str, ...]:
    """Whose exercise runs are the learner's when no request says: a user's own (a visitor's runs become theirs
    when they sign in, `merge_visitor`); a visitor's are known only from their session (practice.exercise_owners)."""
    return (f"u:{learner.user.pk}",) if learner.user is not None else ()


def settle(learner: Learner, module, owners: tuple[str, ...] | None = None, *, marked: bool = False) -> Completion:
    """Apply the completion rule to what `learner` has done in `module` (its quiz, labs and exercises; `owners`: whose
    exercise runs count, by default `learner_owners`) and record the moment it is first met. `marked`: the learner
    pressed "Mark as complete", which stands for the quiz of a module without one."""
    progress = touch(learner, module) if marked else get_progress(learner, module)
    practice = practice_by_module([module], learner, learner_owners(learner) if owners is None else owners)
    state = completion_for(module.questions.all().count(), progress.best_score if progress else None,
                           practice[module.pk], marked=marked)
    if state.met and progress is not None and progress.completed_at is None:
        mark_complete(learner, module)
    return state


def settle_started(learner: Learner, owners: tuple[str, ...] | None = None) -> None:
    """`settle` each module the learner started and has not completed (e.g. once a visitor's practice is theirs)."""
    for progress in ModuleProgress.objects.for_learner(learner).filter(completed_at=None).select_related("module"):
        settle(learner, progress.module, owners)


def mark_complete(learner: Learner, module) -> ModuleProgress:
    """Record the module as complete now (callers decide by the rule: `settle`)."""
    progress = touch(learner, module)
    if progress.completed_at is None:
        progress.completed_at = timezone.now()
        progress.save(update_fields=["completed_at"])
    return progress


def save_place(learner: Learner, module, *, seconds: float | None = None, section: str | None = None) -> None:
    """Remember where the learner is: audio position and/or the section being read."""
    progress = touch(learner, module)
    fields = []
    if seconds is not None:
        progress.audio_position = max(0.0, seconds)
        fields.append("audio_position")
    if section is not None:
        progress.last_section = section
        fields.append("last_section")
    if fields:
        progress.save(update_fields=fields)


def record_attempt(learner: Learner, module, result, owners: tuple[str, ...] | None = None) -> QuizAttempt:
    """Store a graded quiz attempt and the learner's best score; a pass completes the module when its labs and
    exercises are done too (`settle`, with `owners` as there)."""
    attempt = QuizAttempt.objects.create(
        module=module, score=result.score, total=result.total, answers=result.answers, **learner.owner()
    )
    progress = touch(learner, module)
    progress.best_score = max(progress.best_score or 0, result.score)
    progress.save(update_fields=["best_score"])
    if result.passed:
        settle(learner, module, owners)
    return attempt


@transaction.atomic
def merge_visitor(visitor: str, user, run_owner: str = "") -> int:
    """Move an anonymous visitor's progress, quiz and lab attempts (`visitor`: their id in the session) and their
    exercise submissions and finished demo runs (`run_owner`: their session token's owner, demos/identity.py) to
    `user`, so they follow the account to any device; returns the rows moved."""
    merged = _merge_runs(run_owner, user) + _merge_labs(visitor, user)
    if not visitor:
        return merged
    mine = {p.module_id: p for p in ModuleProgress.objects.filter(user=user)}
    merged = 0
    for anon in ModuleProgress.objects.filter(user=None, visitor=visitor):
        existing = mine.get(anon.module_id)
        if existing is None:
            anon.user, anon.visitor = user, ""
            anon.save()
        else:
            if anon.completed_at and (not existing.completed_at or anon.completed_at < existing.completed_at):
                existing.completed_at = anon.completed_at
            existing.best_score = max(existing.best_score or 0, anon.best_score or 0) or None
            if anon.visited_at > existing.visited_at:
                existing.audio_position = anon.audio_position
                existing.last_section = anon.last_section
            existing.save()
            anon.delete()
        merged += 1
    merged += QuizAttempt.objects.filter(user=None, visitor=visitor).update(user=user, visitor="")
    return merged


def _merge_runs(run_owner: str, user) -> int:
    """Exercise submissions and finished demo runs (a lab's table is built from them) move to the user's owner; a
    run still going keeps the owner its socket knows, and stays the user's through the session's token."""
    if not run_owner:
        return 0
    owner = f"u:{user.pk}"
    moved = Submission.objects.filter(owner=run_owner).update(owner=owner, user=user)
    return moved + Run.objects.filter(owner=run_owner).exclude(status__in=Run.ACTIVE).update(owner=owner, user=user)


def _merge_labs(visitor: str, user) -> int:
    """A visitor's lab attempts become the user's; where both have one, a submitted attempt wins over an unsubmitted
    one, else the one answered last."""
    if not visitor:
        return 0
    mine = {(a.module_id, a.lab_key): a for a in LabAttempt.objects.filter(user=user)}
    moved = 0
    for anon in LabAttempt.objects.filter(user=None, visitor=visitor):
        existing = mine.get((anon.module_id, anon.lab_key))
        if existing is not None:
            if existing.submitted_at or (not anon.submitted_at and existing.updated_at >= anon.updated_at):
                anon.delete()
                continue
            existing.delete()
        LabAttempt.objects.filter(pk=anon.pk).update(user=user, visitor="")  # keeps its updated_at
        moved += 1
    return moved
