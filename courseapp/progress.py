"""Learner progress for signed-in users and anonymous visitors (kept in the session, merged on login).

An anonymous visitor has no visitor id, no session and no progress row until they act: answer a quiz, complete
a module, or save a place (audio position while listening, or the section they scrolled to). Only an action
passes `create=True`; page views read, and record a visit only for a learner who already has an id."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from .models import ModuleProgress, QuizAttempt

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


def mark_complete(learner: Learner, module) -> ModuleProgress:
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


def record_attempt(learner: Learner, module, result) -> QuizAttempt:
    attempt = QuizAttempt.objects.create(
        module=module, score=result.score, total=result.total, answers=result.answers, **learner.owner()
    )
    progress = touch(learner, module)
    progress.best_score = max(progress.best_score or 0, result.score)
    if result.passed and progress.completed_at is None:
        progress.completed_at = timezone.now()
    progress.save(update_fields=["best_score", "completed_at"])
    return attempt


@transaction.atomic
def merge_visitor(visitor: str, user) -> int:
    """Move an anonymous visitor's progress and attempts to `user`; returns the rows merged."""
    if not visitor:
        return 0
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
