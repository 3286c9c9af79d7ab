"""Server-side quiz grading."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

PASS_FRACTION = 0.8


@dataclass
class ChoiceOutcome:
    choice: object
    selected: bool

    @property
    def show_explanation(self) -> bool:
        return self.selected

    @property
    def verdict(self) -> str:
        if not self.selected:
            return ""
        return "correct" if self.choice.correct else "incorrect"


@dataclass
class QuestionOutcome:
    question: object
    choices: list[ChoiceOutcome]
    correct: bool
    answered: bool


@dataclass
class QuizResult:
    questions: list[QuestionOutcome]
    answers: dict = field(default_factory=dict)

    @property
    def score(self) -> int:
        return sum(q.correct for q in self.questions)

    @property
    def total(self) -> int:
        return len(self.questions)

    @property
    def pass_mark(self) -> int:
        return pass_mark(self.total)

    @property
    def passed(self) -> bool:
        return self.score >= self.pass_mark

    def outcome_for(self, question) -> QuestionOutcome | None:
        return next((q for q in self.questions if q.question.pk == question.pk), None)


def pass_mark(total: int) -> int:
    return math.ceil(total * PASS_FRACTION)


def grade(questions, data) -> QuizResult:
    """Grade submitted form data (`q<order>` → choice orders) against questions with prefetched choices."""
    outcomes, answers = [], {}
    for question in questions:
        raw = data.getlist(question.field_name) if hasattr(data, "getlist") else data.get(question.field_name, [])
        selected = {int(v) for v in raw if str(v).isdigit()}
        choices = list(question.choices.all())
        selected &= {c.order for c in choices}
        answers[str(question.order)] = sorted(selected)
        correct_set = {c.order for c in choices if c.correct}
        outcomes.append(QuestionOutcome(
            question=question,
            choices=[ChoiceOutcome(choice=c, selected=c.order in selected) for c in choices],
            correct=bool(selected) and selected == correct_set,
            answered=bool(selected),
        ))
    return QuizResult(questions=outcomes, answers=answers)
