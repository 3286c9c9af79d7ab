"""Labs and exercises in the gradebook: per student and module, each lab's submitted score and each embedded
exercise's best run (passed, or failed with how many runs), with their posts to the LMS; and, on one student's page,
their lab tables and answers and their exercise code.

A module's labs are `labs.models.Lab` rows; its exercises are those its lesson embeds (courseapp/practice.py reads
them from the rendered HTML). A lab counts once submitted (its `score`: correct ÷ graded questions); an exercise
counts from the student's graded runs while logged in (`Submission.user`): passed if any passed every test.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Max, Q

from courseapp.models import Module
from courseapp.practice import exercise_ids
from exercises import catalog
from exercises.models import Submission
from labs.models import Lab, LabAttempt
from lti.score_status import LmsScore, lms_scores_by_activity

DONE, FAILED, STARTED, NONE = "done", "failed", "started", "none"


@dataclass(frozen=True)
class PracticeResult:
    kind: str  # "lab" or "exercise"
    key: str  # the lab's id in its module, or the exercise's id
    title: str
    state: str  # DONE (submitted / passed), FAILED (runs, none passed), STARTED (a lab not submitted), NONE
    text: str  # the result in words: "67%", "passed", "failed (3 runs)", "not submitted", "not tried"
    lms: LmsScore | None = None

    @property
    def activity(self) -> str:
        return f"{self.kind}:{self.key}"

    @property
    def kind_label(self) -> str:
        return "Lab" if self.kind == "lab" else "Exercise"


def module_practice(modules: list[Module]) -> dict[int, list[tuple[str, str, str]]]:
    """module id → its (kind, key, title): labs in lesson order, then the exercises its lesson embeds."""
    items: dict[int, list[tuple[str, str, str]]] = {m.pk: [] for m in modules}
    for module_id, key, title in Lab.objects.filter(module_id__in=items).order_by("module_id", "order") \
            .values_list("module_id", "key", "definition__title"):
        items[module_id].append(("lab", key, title or key))
    for module in modules:
        for exercise_id in exercise_ids(module.html or ""):
            exercise = catalog.get(exercise_id)
            if exercise is not None:
                items[module.pk].append(("exercise", exercise_id, exercise.title))
    return items


def lab_percent(score: float | None) -> int | None:
    return None if score is None else round(score * 100)


def _lab_result(key: str, title: str, attempt: dict | None) -> tuple[str, str]:
    if attempt is None:
        return NONE, "not started"
    if attempt["submitted_at"] is None:
        return STARTED, "not submitted"
    return DONE, f"{lab_percent(attempt['score'])}%"


def _exercise_result(runs: dict | None) -> tuple[str, str]:
    if not runs or not runs["runs"]:
        return NONE, "not tried"
    if runs["passed"]:
        return DONE, "passed"
    return FAILED, f"failed ({runs['runs']} run{'s' if runs['runs'] != 1 else ''})"


def practice_results(user_ids: list[int], modules: list[Module], lms: dict | None = None,
                     ) -> dict[tuple[int, int], list[PracticeResult]]:
    """(user id, module id) → one result per lab and exercise of the module, in four queries for the class (`lms`:
    `lms_scores_by_activity(user_ids)` when the caller has it already)."""
    items = module_practice(modules)
    attempts = {(a["user_id"], a["module_id"], a["lab_key"]): a for a in LabAttempt.objects.filter(
        user_id__in=user_ids, module_id__in=items).values("user_id", "module_id", "lab_key", "score", "submitted_at")}
    wanted = {key for entries in items.values() for kind, key, _ in entries if kind == "exercise"}
    runs = {(r["user_id"], r["exercise_id"]): r for r in Submission.objects.filter(
        user_id__in=user_ids, exercise_id__in=wanted, status=Submission.Status.DONE).order_by()
        .values("user_id", "exercise_id").annotate(runs=Count("pk"), passed=Count("pk", filter=Q(passed=True)))} \
        if wanted else {}
    lms = lms_scores_by_activity(user_ids) if lms is None else lms
    results: dict[tuple[int, int], list[PracticeResult]] = {}
    for uid in user_ids:
        for module_id, entries in items.items():
            row = []
            for kind, key, title in entries:
                if kind == "lab":
                    state, text = _lab_result(key, title, attempts.get((uid, module_id, key)))
                else:
                    state, text = _exercise_result(runs.get((uid, key)))
                row.append(PracticeResult(kind, key, title, state, text, lms.get((uid, module_id, f"{kind}:{key}"))))
            results[(uid, module_id)] = row
    return results


def csv_header(module: Module, entries: list[tuple[str, str, str]]) -> list[str]:
    return [f"{module.slug}: lab {key} (%)" if kind == "lab" else f"{module.slug}: exercise {key}"
            for kind, key, _ in entries]


def csv_values(results: list[PracticeResult]) -> list[object]:
    return [result.text.rstrip("%") if result.kind == "lab" and result.state == DONE else
            ("" if result.state == NONE else result.text) for result in results]


# --- One student ------------------------------------------------------------------------------------------

def _figure(value) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) else "–"


@dataclass(frozen=True)
class LabRecord:
    module: Module
    definition: dict
    attempt: LabAttempt

    @property
    def title(self) -> str:
        return self.definition.get("title") or self.attempt.lab_key

    @property
    def percent(self) -> int | None:
        return lab_percent(self.attempt.score)

    @property
    def metric(self) -> str:
        """The lab's own metric in words, with its unit, as the table names it."""
        table = (self.attempt.feedback or {}).get("table") or {}
        described = (table.get("metrics") or {}).get(table.get("metric"), {})
        unit = f" ({described['unit']})" if described.get("unit") else ""
        return f"{described.get('label') or table.get('metric') or 'value'}{unit}"

    @property
    def rows(self) -> list[dict]:
        """The table the lab was graded against (kept with its feedback at submission), one row per configuration."""
        table = (self.attempt.feedback or {}).get("table") or {}
        rows = []
        for row in table.get("rows") or []:
            stats = (row.get("stats") or {}).get(table.get("metric")) or {}
            rows.append({"label": row.get("label", ""), "median": _figure(stats.get("median")),
                         "spread": f"{_figure(stats.get('min'))}–{_figure(stats.get('max'))}" if stats else "–",
                         "runs": row.get("runs", 0),
                         "setup": " · ".join(x for x in (row.get("device"), row.get("dtype"),
                                                         row.get("engine_version")) if x)})
        return rows

    @property
    def answers(self) -> list[dict]:
        """Each question with the student's answer and, once submitted, the grade and the feedback they got."""
        graded = (self.attempt.feedback or {}).get("questions") or {}
        lines = []
        for question in self.definition.get("questions") or []:
            verdict = graded.get(question.get("id"), {}) if isinstance(graded, dict) else {}
            answer = (self.attempt.answers or {}).get(question.get("id"))
            lines.append({"text": question.get("text", question.get("id", "")), "answer": answer,
                          "correct": verdict.get("correct"), "message": verdict.get("message", "")})
        return lines


@dataclass(frozen=True)
class ExerciseRecord:
    exercise_id: str
    title: str
    runs: int
    passed: bool
    shown: Submission  # the first passing run, else the newest graded one: its code and test results


def student_labs(user) -> list[LabRecord]:
    labs = {(lab.module_id, lab.key): lab.definition for lab in Lab.objects.all()}
    return [LabRecord(a.module, labs[(a.module_id, a.lab_key)], a) for a in
            LabAttempt.objects.filter(user=user).select_related("module")
            .order_by("module__track__order", "module__order", "lab_key") if (a.module_id, a.lab_key) in labs]


def student_exercises(user) -> list[ExerciseRecord]:
    done = Submission.objects.filter(user=user, status=Submission.Status.DONE)
    records = []
    for row in done.order_by().values("exercise_id").annotate(runs=Count("pk"), passed=Max("finished_at",
                                                                                          filter=Q(passed=True))):
        exercise = catalog.get(row["exercise_id"])
        if exercise is None:
            continue
        mine = done.filter(exercise_id=row["exercise_id"])
        shown = (mine.filter(passed=True).order_by("finished_at").first() if row["passed"] else None) \
            or mine.order_by("-finished_at").first()
        records.append(ExerciseRecord(row["exercise_id"], exercise.title, row["runs"], row["passed"] is not None,
                                      shown))
    return sorted(records, key=lambda record: record.title.casefold())
