"""When a module is complete: the one rule every page follows.

A module is complete when its assessment is passed AND its practice is done: its quiz passed (a module without a
quiz: the learner's "Mark as complete") and each of its labs submitted and each of its exercises passed
(courseapp/practice.py says which). The course pages this project grew from make the lab and the assessment the
completion standard; a quiz alone no longer completes a module that has a lab or an exercise.

`progress.settle` applies the rule and records the moment it was first met in `ModuleProgress.completed_at`, which
the course map, the index, due dates (classes/deadlines.py), the gradebook and the cohort figures read; a module once
complete stays complete (a lab added to it later does not make a student's earlier completion late).
`Completion.summary` tells the student what is met and what is left ("Quiz passed · exercise still to pass").
"""
from __future__ import annotations

from dataclasses import dataclass

from .practice import PracticeItem
from .quiz import pass_mark

# What each kind of practice needs, in the summary's words: (done, still to do).
PRACTICE_WORDS = {"lab": ("submitted", "still to submit"), "exercise": ("passed", "still to pass")}


@dataclass(frozen=True)
class Completion:
    question_count: int
    quiz_passed: bool
    practice: tuple[PracticeItem, ...]
    marked: bool = False  # the learner pressed "Mark as complete" (counts only for a module without a quiz)

    @property
    def assessed(self) -> bool:
        return self.quiz_passed if self.question_count else self.marked

    @property
    def practice_done(self) -> bool:
        return all(item.done for item in self.practice)

    @property
    def met(self) -> bool:
        return self.assessed and self.practice_done

    @property
    def parts(self) -> list[str]:
        """Each requirement and whether it is met, in the order a student meets them (quiz, labs, exercises)."""
        parts = ["quiz passed" if self.quiz_passed else "quiz not passed yet"] if self.question_count else []
        for kind, (done_words, todo_words) in PRACTICE_WORDS.items():
            items = [item for item in self.practice if item.kind == kind]
            done = sum(item.done for item in items)
            if not items:
                continue
            if done == len(items):
                parts.append(f"{kind}{'s' if len(items) > 1 else ''} {done_words}")
            elif len(items) == 1:
                parts.append(f"{kind} {todo_words}")
            else:
                parts.append(f"{len(items) - done} of {len(items)} {kind}s {todo_words}")
        return parts

    @property
    def summary(self) -> str:
        """E.g. "Quiz passed · exercise still to pass"; "" for a module with neither quiz nor practice."""
        text = " · ".join(self.parts)
        return text[:1].upper() + text[1:]


def completion_for(question_count: int, best_score: int | None, practice, *, marked: bool = False) -> Completion:
    """The rule applied to what a learner has done: their best quiz score and their practice items."""
    passed = bool(question_count) and best_score is not None and best_score >= pass_mark(question_count)
    return Completion(question_count=question_count, quiz_passed=passed, practice=tuple(practice), marked=marked)


def started_summary(question_count: int, progress, practice) -> str:
    """The index card's summary of a module the learner started (`progress`: their ModuleProgress, or None) or did
    some of the practice of, until it is complete; "" otherwise."""
    if (progress is not None and progress.completed) or (progress is None and not any(i.done for i in practice)):
        return ""
    return completion_for(question_count, progress.best_score if progress else None, practice).summary
