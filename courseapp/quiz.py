"""Server-side quiz grading, with choices shown in a per-attempt shuffled order.

The form never names a choice by its authored order (in most questions the first authored choice is the
correct one): each attempt gets a random `seed`, the page shows every question's choices in the order
`shuffled(question, seed)` gives, and a submitted value is a 1-based position in that order. Grading maps
positions back through the same seed, so scores never depend on the shuffle.

The seed travels in a hidden field signed for the module (`seed_token`), and a post is graded only with a
valid one: a missing seed (which would mean the authored order, where "always the first choice" scores
full marks), a forged or altered one, or one signed for another module is refused as out of date.

Feedback never calls a wrong answer right: a multiple-choice question is correct only when exactly its
correct choices are selected; a partly right one says how many right choices were found and missed. On a
retry (the learner's second or later attempt) a question still wrong reveals its right answer. A post
that selects nothing at all is not graded (`NothingChosen`), so no attempt is recorded for it.
"""
from __future__ import annotations

import math
import random
import secrets
from dataclasses import dataclass, field

from django.core import signing

from .input_limits import parse_digits

PASS_FRACTION = 0.8
SEED_FIELD = "quiz_seed"
MAX_SEED = 2**32 - 1
MAX_POSITION_DIGITS = 4  # a choice's position: no question has 10,000 choices
SEED_SALT = "courseapp.quiz.seed"
OUT_OF_DATE = "The quiz form is out of date: reload the page and answer again."


NOTHING_CHOSEN = "Choose an answer to at least one question before checking: nothing was graded."


class QuizInputError(ValueError):
    """A submitted answer that is not one of the question's choices (shown to the student as a 400)."""


class NothingChosen(QuizInputError):
    """An empty submission: not graded, no attempt recorded."""


@dataclass
class ChoiceOutcome:
    choice: object
    selected: bool
    revealed: bool = False  # a right choice the learner missed, shown as the answer after a retry

    @property
    def show_explanation(self) -> bool:
        return self.selected or self.verdict == "missed"

    @property
    def verdict(self) -> str:
        """"correct"/"incorrect" for a selected choice; "missed" for a right one not selected, once revealed."""
        if not self.selected:
            return "missed" if self.revealed and self.choice.correct else ""
        return "correct" if self.choice.correct else "incorrect"


@dataclass
class QuestionOutcome:
    question: object
    choices: list[ChoiceOutcome]  # in the order the student saw them
    correct: bool
    answered: bool

    @property
    def found(self) -> int:
        """Right choices selected."""
        return sum(c.selected and c.choice.correct for c in self.choices)

    @property
    def right_total(self) -> int:
        return sum(bool(c.choice.correct) for c in self.choices)

    @property
    def wrong_picked(self) -> int:
        return sum(c.selected and not c.choice.correct for c in self.choices)

    @property
    def missed(self) -> int:
        return self.right_total - self.found

    @property
    def revealed(self) -> bool:
        return any(c.revealed for c in self.choices)

    def reveal(self) -> None:
        """Show the right answer (a question still wrong on a retry)."""
        if not self.correct:
            for outcome in self.choices:
                outcome.revealed = True


@dataclass
class QuizResult:
    questions: list[QuestionOutcome]
    answers: dict = field(default_factory=dict)  # question id → chosen choice ids, in authored order
    seed: int | None = None

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

    def reveal_answers(self) -> None:
        """On a retry: every question still wrong shows its right answer, with the explanations."""
        for outcome in self.questions:
            outcome.reveal()


def pass_mark(total: int) -> int:
    return math.ceil(total * PASS_FRACTION)


def new_seed() -> int:
    return secrets.randbelow(MAX_SEED) + 1


def _signer(module_slug: str) -> signing.Signer:
    return signing.Signer(salt=f"{SEED_SALT}:{module_slug}")


def seed_token(module_slug: str, seed: int) -> str:
    """The hidden field's value: the attempt's seed, signed for this module."""
    return _signer(module_slug).sign(str(seed))


def parse_seed(raw, module_slug: str) -> int:
    """The attempt's seed from the form's signed token; QuizInputError when absent, forged or malformed."""
    if raw in (None, ""):
        raise QuizInputError(OUT_OF_DATE)
    try:
        text = _signer(module_slug).unsign(str(raw))
    except signing.BadSignature:
        raise QuizInputError(OUT_OF_DATE) from None
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) <= MAX_SEED:
        raise QuizInputError(OUT_OF_DATE)
    return int(text)


def shuffled(question, seed: int | None) -> list:
    """The question's choices in the order this attempt shows them (authored order without a seed)."""
    choices = list(question.choices.all())
    if seed is not None:
        random.Random(f"{seed}:{question.key}").shuffle(choices)
    return choices


def _positions(question, raw_values) -> set[int]:
    positions = set()
    for value in raw_values:
        text = str(value)
        position = parse_digits(text, MAX_POSITION_DIGITS)  # never int() of a 5,000-digit answer
        if position is None:
            shown = text if len(text) <= 20 else f"{text[:20]}…"
            raise QuizInputError(f"Question {question.order}: “{shown}” is not one of its choices.")
        positions.add(position)
    return positions


def grade(questions, data, seed: int | None = None) -> QuizResult:
    """Grade submitted form data (`q<order>` → 1-based positions in this attempt's order).

    Raises QuizInputError for a value that is not a position of one of the question's choices, and
    NothingChosen when no question has an answer (such a post is not graded).
    """
    outcomes, answers = [], {}
    for question in questions:
        raw = data.getlist(question.field_name) if hasattr(data, "getlist") else data.get(question.field_name, [])
        if isinstance(raw, str):
            raw = [raw]
        shown = shuffled(question, seed)
        positions = _positions(question, raw)
        if any(not 1 <= p <= len(shown) for p in positions):
            raise QuizInputError(f"Question {question.order} has choices 1 to {len(shown)} only.")
        selected = {shown[p - 1].key for p in positions}
        answers[question.key] = [c.key for c in sorted(shown, key=lambda c: c.order) if c.key in selected]
        correct_set = {c.key for c in shown if c.correct}
        outcomes.append(QuestionOutcome(
            question=question,
            choices=[ChoiceOutcome(choice=c, selected=c.key in selected) for c in shown],
            correct=bool(selected) and selected == correct_set,
            answered=bool(selected),
        ))
    if outcomes and not any(o.answered for o in outcomes):
        raise NothingChosen(NOTHING_CHOSEN)
    return QuizResult(questions=outcomes, answers=answers, seed=seed)
