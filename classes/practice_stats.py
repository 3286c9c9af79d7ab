"""A module's labs and exercises in the class figures (stats.py's range and population; no HTTP here).

Definitions (the dashboard, its CSV and the tests share them):

- A lab's *started* learners saved answers to it or submitted it in the range (`LabAttempt.updated_at`, the last
  save); *submitted*, those whose submission falls in the range; the *median score* is the median of those
  submissions' scores (correct ÷ graded questions), as a percentage.
- An exercise's *tried* learners had a run of it graded in the range ("Run tests" that the sandbox answered: runs
  it could not grade are left out); *passed*, those with a run passing every test in the range; the *median score*
  is the median over the tried learners of their best run's share of tests passed, as a percentage.
- A learner is a user, or (everyone's figures) an anonymous visitor: their session's visitor id for labs, their
  run owner for exercises. Given `students`, only those users count.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from exercises.models import Submission
from labs.models import LabAttempt

from .practice_grades import module_practice


@dataclass(frozen=True)
class PracticeStats:
    kind: str  # "lab" or "exercise"
    key: str
    title: str
    started: int  # a lab's learners who saved or submitted; an exercise's learners with a graded run
    done: int  # submitted (lab) or passed (exercise)
    median_score_percent: float | None  # None when nobody has a score

    @property
    def kind_label(self) -> str:
        return "Lab" if self.kind == "lab" else "Exercise"

    @property
    def done_label(self) -> str:
        return "submitted" if self.kind == "lab" else "passed"


def _median_percent(scores: list[float]) -> float | None:
    return round(100 * statistics.median(scores), 1) if scores else None


def _lab_stats(module, key: str, title: str, date_range, students: QuerySet | None) -> PracticeStats:
    attempts = LabAttempt.objects.filter(module=module, lab_key=key).filter(Q(user__isnull=False) | ~Q(visitor=""))
    if students is not None:
        attempts = attempts.filter(user__in=students)
    active = attempts.filter(date_range.q("updated_at") | date_range.q("submitted_at"))
    started = active.order_by().values("user_id", "visitor").distinct().count()
    scores = list(attempts.filter(date_range.q("submitted_at")).values_list("score", flat=True))
    return PracticeStats("lab", key, title, started=started, done=len(scores),
                         median_score_percent=_median_percent([s for s in scores if s is not None]))


def _exercise_stats(key: str, title: str, date_range, students: QuerySet | None) -> PracticeStats:
    graded = Submission.objects.filter(date_range.q("finished_at"), exercise_id=key, status=Submission.Status.DONE)
    if students is not None:
        graded = graded.filter(user__in=students)
    best: dict[str, float] = {}
    for owner, results in graded.order_by().values_list("owner", "results"):
        tests = results.get("n_tests") if isinstance(results, dict) else None
        share = results.get("n_passed", 0) / tests if tests else 0.0
        best[owner] = max(best.get(owner, 0.0), share)
    passed = graded.filter(passed=True).aggregate(n=Count("owner", distinct=True))["n"]
    return PracticeStats("exercise", key, title, started=len(best), done=passed,
                         median_score_percent=_median_percent(list(best.values())))


def practice_stats(module, date_range, students: QuerySet | None = None) -> list[PracticeStats]:
    """One row per lab (lesson order) then per exercise the lesson embeds, zeros included."""
    rows = []
    for kind, key, title in module_practice([module])[module.pk]:
        rows.append(_lab_stats(module, key, title, date_range, students) if kind == "lab"
                    else _exercise_stats(key, title, date_range, students))
    return rows
