"""Class statistics for one module over a date range: learners, quiz answers, demo runs (no HTTP here).

Definitions (the dashboard, its CSV and the tests share them):

- The range is a set of calendar days, both ends included, in the current time zone.
- Learners come in two groups: signed-in users (counted by user) and anonymous visitors, reported together
  as one group (counted by the visitor id kept in their session; rows without an id are not counted). A visitor
  gets an id only by acting (quiz, completion, saved place: progress.py), so page views alone count nobody.
- A learner *started* the module in the range when their progress row was visited or completed in it, or
  they submitted its quiz in it. `ModuleProgress.visited_at` is the *last* visit (it is `auto_now`), so a
  learner who first came before the range and came back inside it counts as started in it.
- A learner *completed* it in the range when their `completed_at` falls in it; so completed ⊆ started.
- Quiz questions and choices are matched to the stored answers by their stable ids (`courseapp.quiz_ids`),
  so reordering a quiz or its choices keeps every answer on its question and choice; correctness is
  re-derived from the quiz as it is now (an answer is correct when its set of choices is exactly the set of
  correct choices, as in `quiz.grade`). Ids the current quiz lacks (deleted since) are ignored.
- A demo run belongs to a module when the module embeds a demo of that name: a demo embedded in two modules
  counts for both, and runs are not tied to the page they were started from.
- Given `students` (a cohort's enrolled students: roster.py `class_students`), the figures count those
  users alone, as one group: anonymous visitors, staff, instructors (and so their preview runs) and every other
  account are left out of learners, quiz answers and demo runs alike. Without it, everyone is counted.
- Labs and exercises: practice_stats.py.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from demos.models import Run

from courseapp.models import Module, ModuleProgress, Question, QuizAttempt
from courseapp.quiz import pass_mark

from .practice_stats import PracticeStats, practice_stats

DEFAULT_DAYS = 30
SIGNED_IN, ANONYMOUS, ENROLLED = "signed_in", "anonymous", "enrolled"
GROUP_LABELS = {SIGNED_IN: "Signed-in students", ANONYMOUS: "Anonymous visitors (one group)",
                ENROLLED: "Enrolled students"}
EVERYONE = "all learners"
NO_ERROR_CODE = "(no code)"


@dataclass(frozen=True)
class DateRange:
    """Calendar days `start` to `end`, both included; `start <= end`."""

    start: date
    end: date

    def __post_init__(self) -> None:
        if self.start > self.end:
            raise ValueError("The start date is after the end date.")

    @classmethod
    def last_days(cls, days: int = DEFAULT_DAYS, today: date | None = None) -> "DateRange":
        """The `days` days ending today (today included)."""
        end = today or timezone.localdate()
        return cls(end - timedelta(days=days - 1), end)

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    def bounds(self) -> tuple[datetime, datetime]:
        """[first instant, first instant after) as aware datetimes: a half-open interval, so no instant of
        the last day is lost to rounding."""
        zone = timezone.get_current_timezone()
        first = timezone.make_aware(datetime.combine(self.start, time.min), zone)
        after = timezone.make_aware(datetime.combine(self.end + timedelta(days=1), time.min), zone)
        return first, after

    def q(self, field_name: str) -> Q:
        """`field_name` falls within the range."""
        first, after = self.bounds()
        return Q(**{f"{field_name}__gte": first, f"{field_name}__lt": after})


@dataclass(frozen=True)
class GroupStats:
    """One learner group's counts; `started >= completed` and `quiz_takers <= quiz_attempts`."""

    key: str
    label: str
    started: int
    completed: int
    quiz_attempts: int
    quiz_takers: int


@dataclass(frozen=True)
class QuizSummary:
    """Every attempt in the range; rates are fractions in [0, 1], None when there are no attempts."""

    attempts: int
    passed: int
    mean_score_percent: float | None  # the mean of score/total × 100 (attempts with total 0 count as 0)

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.attempts if self.attempts else None


@dataclass(frozen=True)
class ChoiceStats:
    order: int  # its place in the question now
    key: str
    text: str
    correct: bool
    picks: int
    answered: int  # attempts that answered the question (the denominator of `pick_rate`)

    @property
    def pick_rate(self) -> float | None:
        """Share of answers that picked this choice: on a multiple-answer question the rates sum past 1."""
        return self.picks / self.answered if self.answered else None


@dataclass(frozen=True)
class QuestionStats:
    order: int  # its place in the quiz now
    key: str
    text: str
    answered: int  # attempts that picked at least one choice
    correct: int  # of those, attempts whose picks are exactly the correct choices
    choices: list[ChoiceStats]

    @property
    def correct_rate(self) -> float | None:
        return self.correct / self.answered if self.answered else None

    @property
    def multiple(self) -> bool:
        return sum(choice.correct for choice in self.choices) > 1

    @property
    def top_distractor(self) -> ChoiceStats | None:
        """The wrong choice picked most (the first in authored order on a tie); None when no one picked one."""
        wrong = [choice for choice in self.choices if not choice.correct and choice.picks]
        return max(wrong, key=lambda choice: (choice.picks, -choice.order), default=None)


@dataclass(frozen=True)
class DemoStats:
    """Runs of one demo started in the range; `total = done + cancelled + error + in_progress`."""

    demo: str
    total: int
    done: int
    cancelled: int
    error: int
    in_progress: int  # queued or running now
    error_codes: dict[str, int] = field(default_factory=dict)  # of the error runs, most frequent first


@dataclass(frozen=True)
class ClassStats:
    module: Module
    date_range: DateRange
    groups: list[GroupStats]
    quiz: QuizSummary
    questions: list[QuestionStats]
    demos: list[DemoStats]
    population: str = EVERYONE  # whose activity is counted, for captions: "all learners" or a cohort's students
    practice: list[PracticeStats] = field(default_factory=list)  # its labs, then its exercises

    @property
    def started(self) -> int:
        return sum(group.started for group in self.groups)

    @property
    def completed(self) -> int:
        return sum(group.completed for group in self.groups)

    @property
    def quiz_attempts(self) -> int:
        """Attempts by identified learners: `quiz.attempts` also counts any attempt that names no one."""
        return sum(group.quiz_attempts for group in self.groups)

    @property
    def quiz_takers(self) -> int:
        return sum(group.quiz_takers for group in self.groups)


# --- Learners ---------------------------------------------------------------------------------------------

def _group_filter(group: str, students: QuerySet | None = None) -> Q:
    """Rows of a group that name a learner (an anonymous row without a visitor id names no one)."""
    if group == ENROLLED:
        return Q(user__in=students)
    if group == SIGNED_IN:
        return Q(user__isnull=False)
    return Q(user__isnull=True) & ~Q(visitor="")


def _learner_field(group: str) -> str:
    return "visitor" if group == ANONYMOUS else "user_id"


def group_stats(module: Module, date_range: DateRange, group: str, students: QuerySet | None = None) -> GroupStats:
    """`students` is the ENROLLED group's users (required for that group, ignored by the others)."""
    learner = _learner_field(group)
    progress = ModuleProgress.objects.filter(_group_filter(group, students), module=module)
    attempts = QuizAttempt.objects.filter(_group_filter(group, students), date_range.q("created_at"), module=module)
    active = progress.filter(date_range.q("visited_at") | date_range.q("completed_at"))
    # UNION (not UNION ALL) removes duplicates, so the database counts distinct learners.
    started = active.order_by().values_list(learner).union(attempts.order_by().values_list(learner)).count()
    completed = progress.filter(date_range.q("completed_at")).aggregate(n=Count(learner, distinct=True))["n"]
    attempt_counts = attempts.aggregate(n=Count("id"), takers=Count(learner, distinct=True))
    return GroupStats(key=group, label=GROUP_LABELS[group], started=started, completed=completed,
                      quiz_attempts=attempt_counts["n"], quiz_takers=attempt_counts["takers"])


# --- Quiz -------------------------------------------------------------------------------------------------

def attempts_in(module: Module, date_range: DateRange, students: QuerySet | None = None) -> QuerySet:
    """Every quiz attempt on the module in the range, signed-in or anonymous (only `students`' when given)."""
    attempts = QuizAttempt.objects.filter(date_range.q("created_at"), module=module)
    return attempts if students is None else attempts.filter(user__in=students)


def quiz_summary(attempts: QuerySet) -> QuizSummary:
    """Grouped by (total, score) in the database: the rows are few whatever the number of attempts."""
    rows = attempts.order_by().values("total", "score").annotate(n=Count("id"))
    count = passed = 0
    percent_sum = 0.0
    for row in rows:
        count += row["n"]
        passed += row["n"] if row["score"] >= pass_mark(row["total"]) else 0
        percent_sum += row["n"] * (100.0 * row["score"] / row["total"] if row["total"] else 0.0)
    return QuizSummary(attempts=count, passed=passed, mean_score_percent=percent_sum / count if count else None)


def chosen_keys(answers: object, question_key: str) -> set[str]:
    """The choice ids an attempt picked for a question; empty for a missing or malformed entry."""
    if not isinstance(answers, dict):
        return set()
    picked = answers.get(question_key)
    if not isinstance(picked, list):
        return set()
    return {value for value in picked if isinstance(value, str)}


def question_stats(questions: list[Question], answer_sets: list[object]) -> list[QuestionStats]:
    """Counted in Python: the answers are JSON, which the databases we support cannot group portably."""
    result = []
    for question in questions:
        choices = list(question.choices.all())
        correct_set = {choice.key for choice in choices if choice.correct}
        known = {choice.key for choice in choices}
        picks: Counter[str] = Counter()
        answered = correct = 0
        for answers in answer_sets:
            picked = chosen_keys(answers, question.key) & known
            if not picked:
                continue
            answered += 1
            correct += picked == correct_set
            picks.update(picked)
        result.append(QuestionStats(
            order=question.order, key=question.key, text=question.text, answered=answered, correct=correct,
            choices=[ChoiceStats(order=c.order, key=c.key, text=c.text, correct=c.correct, picks=picks[c.key],
                                 answered=answered) for c in choices],
        ))
    return result


# --- Demo runs --------------------------------------------------------------------------------------------

def module_demo_names(module: Module) -> list[str]:
    """The demos the lesson embeds, each once, in page order (a malformed `demos` value yields none)."""
    embeds = module.demos if isinstance(module.demos, list) else []
    names = [embed.get("name") for embed in embeds if isinstance(embed, dict)]
    return list(dict.fromkeys(name for name in names if isinstance(name, str) and name))


def demo_stats(names: list[str], date_range: DateRange, students: QuerySet | None = None) -> list[DemoStats]:
    """One row per name, in the order given, zeros included (an embedded demo nobody ran is news too); only
    `students`' runs when given."""
    runs = Run.objects.filter(date_range.q("created_at"), demo__in=names).order_by()
    if students is not None:
        runs = runs.filter(user__in=students)
    by_status: dict[str, Counter[str]] = {name: Counter() for name in names}
    for row in runs.values("demo", "status").annotate(n=Count("id")):
        by_status[row["demo"]][row["status"]] += row["n"]
    codes: dict[str, Counter[str]] = {name: Counter() for name in names}
    for row in runs.filter(status=Run.Status.ERROR).values("demo", "error_code").annotate(n=Count("id")):
        codes[row["demo"]][row["error_code"] or NO_ERROR_CODE] += row["n"]
    return [_demo_row(name, by_status[name], codes[name]) for name in names]


def _demo_row(name: str, statuses: Counter[str], codes: Counter[str]) -> DemoStats:
    done, cancelled, error = (statuses[s] for s in (Run.Status.DONE, Run.Status.CANCELLED, Run.Status.ERROR))
    total = sum(statuses.values())
    # Most frequent first, then by name, so the table and the CSV list codes in a stable order.
    ordered_codes = dict(sorted(codes.items(), key=lambda item: (-item[1], item[0])))
    return DemoStats(demo=name, total=total, done=done, cancelled=cancelled, error=error,
                     in_progress=total - done - cancelled - error, error_codes=ordered_codes)


# --- Everything -------------------------------------------------------------------------------------------

def class_stats(module: Module, date_range: DateRange, students: QuerySet | None = None,
                population: str = EVERYONE) -> ClassStats:
    """Everyone's figures, or (given `students`, named by `population`) only those users'."""
    attempts = attempts_in(module, date_range, students)
    questions = list(module.questions.order_by("order").prefetch_related("choices"))
    answer_sets = list(attempts.values_list("answers", flat=True))
    groups = (SIGNED_IN, ANONYMOUS) if students is None else (ENROLLED,)
    return ClassStats(
        module=module,
        date_range=date_range,
        groups=[group_stats(module, date_range, group, students) for group in groups],
        quiz=quiz_summary(attempts),
        questions=question_stats(questions, answer_sets),
        demos=demo_stats(module_demo_names(module), date_range, students),
        population=population if students is not None else EVERYONE,
        practice=practice_stats(module, date_range, students),
    )
