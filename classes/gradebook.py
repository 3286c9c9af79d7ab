"""The gradebook: a cohort's students × the course's published modules, and one student's full record.

A cell is the student's progress on the module (courseapp's ModuleProgress) with the cohort's due date for it
(classes/deadlines.py): the page and the CSV are built from the same `Gradebook`, so they never disagree.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count
from django.utils import timezone
from django.utils.formats import date_format

from courseapp.models import Module, ModuleProgress, QuizAttempt
from courseapp.quiz import pass_mark
from demos.models import Run
from lti.score_status import LmsScore, lms_scores_by_activity
from openai_api.runner import API_DEMO

from . import deadlines, practice_grades
from .models import Cohort, DueDateExtension
from .roster import class_students
from .stats import chosen_keys

NOT_STARTED, IN_PROGRESS = "not-started", "in-progress"
STATE_LABELS = {NOT_STARTED: "Not started", IN_PROGRESS: "In progress", **deadlines.LABELS,
                deadlines.DUE: "Not done yet"}
RECENT_RUNS = 100


@dataclass(frozen=True)
class Cell:
    module: Module
    state: str  # a deadlines state when the module has a due date (or DONE without one), else NOT_STARTED/IN_PROGRESS
    completed_at: datetime | None
    best_score: int | None
    quiz_total: int  # the module's questions now
    attempts: int
    due_at: datetime | None
    lms: LmsScore | None = None  # the quiz score's posts to the LMS, when the module was launched from one
    practice: tuple[practice_grades.PracticeResult, ...] = ()  # its labs' and exercises' results

    @property
    def label(self) -> str:
        if self.state == deadlines.DUE and self.due_at is not None:  # not done yet, with the date it is due by
            return f"Due {date_format(timezone.localtime(self.due_at), 'j M Y, H:i')}"
        return STATE_LABELS[self.state]

    @property
    def score_text(self) -> str:
        return f"{self.best_score}/{self.quiz_total}" if self.best_score is not None and self.quiz_total else ""


def person_name(user) -> str:
    """What a teacher calls a student: their name (kept current by LMS launches and imports), else username."""
    return user.get_full_name() or user.username


@dataclass(frozen=True)
class StudentRow:
    user: object
    cells: list[Cell]
    left_at: datetime | None = None  # when the LMS's class list stopped having them (lti/roster.py); still here

    @property
    def name(self) -> str:
        return person_name(self.user)

    @property
    def done(self) -> int:
        return sum(cell.state in (deadlines.DONE, deadlines.DONE_LATE) for cell in self.cells)

    @property
    def late(self) -> int:
        return sum(cell.state in (deadlines.LATE, deadlines.DONE_LATE) for cell in self.cells)


@dataclass(frozen=True)
class Gradebook:
    cohort: Cohort
    modules: list[Module]
    rows: list[StudentRow]


def course_modules() -> list[Module]:
    """Published modules in course order, each with `quiz_total` (its number of questions)."""
    return list(Module.objects.published().in_course_order().annotate(quiz_total=Count("questions")))


def _cell(module: Module, progress: ModuleProgress | None, attempts: int, due_at: datetime | None,
          now: datetime | None, lms: LmsScore | None = None, practice: list | None = None) -> Cell:
    completed_at = progress.completed_at if progress else None
    if due_at is not None:
        state = deadlines.status(due_at, completed_at, now).state
    elif completed_at is not None:
        state = deadlines.DONE
    else:
        state = IN_PROGRESS if progress is not None or attempts else NOT_STARTED
    return Cell(module=module, state=state, completed_at=completed_at,
                best_score=progress.best_score if progress else None, quiz_total=module.quiz_total,
                attempts=attempts, due_at=due_at, lms=lms, practice=tuple(practice or ()))


def _cells_for(users: list, modules: list[Module], due: dict[int, datetime],
               now: datetime | None, cohort: Cohort | None = None) -> dict[int, list[Cell]]:
    """user id → one cell per module, from a fixed number of queries whatever the class size; a student's
    extension in `cohort` replaces its due date for them."""
    user_ids = [user.pk for user in users]
    extended = {(uid, mid): at for uid, mid, at in DueDateExtension.objects.filter(
        due_date__cohort=cohort, user_id__in=user_ids).values_list("user_id", "due_date__module_id", "due_at")}
    progress = {(p.user_id, p.module_id): p for p in ModuleProgress.objects.filter(user_id__in=user_ids)}
    attempts = {(row["user_id"], row["module_id"]): row["n"] for row in
                QuizAttempt.objects.filter(user_id__in=user_ids).order_by()
                .values("user_id", "module_id").annotate(n=Count("id"))}
    lms = lms_scores_by_activity(user_ids)
    practice = practice_grades.practice_results(user_ids, modules, lms)
    return {uid: [_cell(m, progress.get((uid, m.pk)), attempts.get((uid, m.pk), 0),
                        extended.get((uid, m.pk), due.get(m.pk)), now,
                        lms.get((uid, m.pk, "quiz")), practice.get((uid, m.pk))) for m in modules]
            for uid in user_ids}


def gradebook(cohort: Cohort, now: datetime | None = None) -> Gradebook:
    modules = course_modules()
    left = dict(cohort.enrollments.filter(active=False).values_list("user_id", "left_at"))
    # Those who left the LMS course come last, their work kept.
    users = sorted(class_students(cohort), key=lambda user: (user.pk in left, person_name(user).casefold(),
                                                             user.username))
    due = dict(cohort.due_dates.values_list("module_id", "due_at"))
    cells = _cells_for(users, modules, due, now, cohort)
    return Gradebook(cohort=cohort, modules=modules,
                     rows=[StudentRow(user, cells[user.pk], left.get(user.pk)) for user in users])


def csv_rows(book: Gradebook) -> list[list[object]]:
    """Header, then one row per student: who they are, then per module its state, best quiz score, and each lab's
    score (%) and exercise's result."""
    header = ["username", "name", "email", "left_lms_course", "modules_done", "modules_late"]
    items = practice_grades.module_practice(book.modules)
    for module in book.modules:
        header += [f"{module.slug}: status", f"{module.slug}: best quiz score (of {module.quiz_total})"]
        header += practice_grades.csv_header(module, items[module.pk])
    rows: list[list[object]] = [header]
    for row in book.rows:
        left = timezone.localtime(row.left_at).strftime("%Y-%m-%d %H:%M") if row.left_at else ""
        line: list[object] = [row.user.username, row.user.get_full_name(), row.user.email, left, row.done, row.late]
        for cell in row.cells:
            line += [cell.label, "" if cell.best_score is None else cell.best_score]
            line += practice_grades.csv_values(list(cell.practice))
        rows.append(line)
    return rows


# --- One student ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AnswerLine:
    order: int
    question: str
    picked: list[str]  # the texts of the choices picked, in the question's order now
    correct: bool | None  # None when the question was not answered


@dataclass(frozen=True)
class AttemptView:
    attempt: QuizAttempt
    answers: list[AnswerLine]
    passed: bool


@dataclass
class StudentRecord:
    user: object
    row: StudentRow
    attempts: list[AttemptView] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    labs: list[practice_grades.LabRecord] = field(default_factory=list)
    exercises: list[practice_grades.ExerciseRecord] = field(default_factory=list)


def answer_lines(module: Module, answers: object) -> list[AnswerLine]:
    """The attempt's answers against the quiz as it is now (by stable ids: courseapp/quiz_ids.py)."""
    lines = []
    for question in module.questions.all():
        choices = list(question.choices.all())
        picked = chosen_keys(answers, question.key) & {choice.key for choice in choices}
        right = {choice.key for choice in choices if choice.correct}
        lines.append(AnswerLine(order=question.order, question=question.text,
                                picked=[choice.text for choice in choices if choice.key in picked],
                                correct=(picked == right) if picked else None))
    return lines


def student_record(cohort: Cohort, user, now: datetime | None = None) -> StudentRecord:
    modules = course_modules()
    due = dict(cohort.due_dates.values_list("module_id", "due_at"))
    row = StudentRow(user, _cells_for([user], modules, due, now, cohort)[user.pk])
    attempts = (QuizAttempt.objects.filter(user=user).select_related("module").order_by("-created_at")
                .prefetch_related("module__questions__choices"))
    views = [AttemptView(attempt=a, answers=answer_lines(a.module, a.answers), passed=a.score >= pass_mark(a.total))
             for a in attempts]
    # their demo runs: API requests (openai_api) are runs too, but no page or share link shows one
    runs = list(Run.objects.filter(user=user).exclude(demo=API_DEMO).order_by("-created_at")[:RECENT_RUNS])
    return StudentRecord(user=user, row=row, attempts=views, runs=runs, labs=practice_grades.student_labs(user),
                         exercises=practice_grades.student_exercises(user))
