"""Instructor views: one module's class dashboard (tables and Plotly charts) and the same numbers as CSV.

Both views read `?start=YYYY-MM-DD&end=YYYY-MM-DD` (default: the last 30 days) and answer 400 for a bad
range. The page and the CSV are built from the same `stats.ClassStats`, and every number the page
shows is a row of the CSV (`metric_rows`), so a spreadsheet and the page never disagree.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from datetime import date
from urllib.parse import urlencode

from django import forms
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from courseapp.instructors import instructor_required
from courseapp.models import Module
from courseapp.quiz import PASS_FRACTION

from .access import taught_cohort, teacher_required
from .roster import class_students
from .stats import EVERYONE, ClassStats, DateRange, QuestionStats, class_stats

# Outside these, a date is a typo (and year 1 or 9999 would overflow the day arithmetic).
MIN_DATE, MAX_DATE = date(2000, 1, 1), date(2999, 12, 31)
CSV_COLUMNS = ["section", "key", "subkey", "value", "label"]
# A spreadsheet runs a cell beginning with one of these as a formula (OWASP "CSV injection").
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
DASH = "–"


# --- The date range ---------------------------------------------------------------------------------------

class DateRangeForm(forms.Form):
    """Start and end days, both included; an absent field takes the default range's value."""

    start = forms.DateField(input_formats=["%Y-%m-%d"], widget=forms.DateInput(attrs={"type": "date"}),
                            label="From")
    end = forms.DateField(input_formats=["%Y-%m-%d"], widget=forms.DateInput(attrs={"type": "date"}),
                          label="To (included)")

    @classmethod
    def from_query(cls, query) -> "DateRangeForm":
        default = DateRange.last_days()
        data = {"start": query.get("start") or default.start.isoformat(),
                "end": query.get("end") or default.end.isoformat()}
        return cls(data)

    def clean(self) -> dict:
        cleaned = super().clean()
        for name in ("start", "end"):
            value = cleaned.get(name)
            if value is not None and not MIN_DATE <= value <= MAX_DATE:
                self.add_error(name, f"Enter a date from {MIN_DATE.isoformat()} to {MAX_DATE.isoformat()}.")
        start, end = cleaned.get("start"), cleaned.get("end")
        if start and end and start > end and not self.errors:
            raise forms.ValidationError("The start date is after the end date.")
        return cleaned

    @property
    def date_range(self) -> DateRange:
        """Only after `is_valid()` returned True."""
        return DateRange(self.cleaned_data["start"], self.cleaned_data["end"])

    def error_messages(self) -> list[str]:
        """Every error as one sentence naming its field, for the page and for the CSV's 400."""
        messages = list(self.non_field_errors())
        for name, errors in self.errors.items():
            if name in self.fields:
                messages += [f"{self.fields[name].label}: {error}" for error in errors]
        return messages


# --- Numbers as text --------------------------------------------------------------------------------------

def percent(rate: float | None) -> str:
    return DASH if rate is None else f"{100 * rate:.1f} %"


def csv_rate(rate: float | None) -> float | str:
    """A fraction rounded to 4 places; empty when undefined (nothing to divide by)."""
    return "" if rate is None else round(rate, 4)


def spreadsheet_safe(value: object) -> object:
    """Text a spreadsheet would run as a formula gets a leading apostrophe; numbers pass unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


# --- CSV rows: one per number -----------------------------------------------------------------------------

@dataclass(frozen=True)
class MetricRow:
    section: str
    key: str
    subkey: str
    value: object
    label: str = ""

    def cells(self) -> list[object]:
        return [spreadsheet_safe(cell) for cell in (self.section, self.key, self.subkey, self.value, self.label)]


def _learner_rows(stats: ClassStats) -> list[MetricRow]:
    rows = []
    for group in stats.groups:
        for subkey in ("started", "completed", "quiz_attempts", "quiz_takers"):
            rows.append(MetricRow("learners", group.key, subkey, getattr(group, subkey), group.label))
    for subkey in ("started", "completed", "quiz_attempts", "quiz_takers"):
        rows.append(MetricRow("learners", "total", subkey, getattr(stats, subkey), "All learners"))
    return rows


def _quiz_rows(stats: ClassStats) -> list[MetricRow]:
    quiz = stats.quiz
    mean = "" if quiz.mean_score_percent is None else round(quiz.mean_score_percent, 2)
    return [MetricRow("quiz", "attempts", "", quiz.attempts), MetricRow("quiz", "passed", "", quiz.passed),
            MetricRow("quiz", "pass_rate", "", csv_rate(quiz.pass_rate)),
            MetricRow("quiz", "mean_score_percent", "", mean)]


def _question_rows(question: QuestionStats) -> list[MetricRow]:
    key = f"q{question.order}"
    distractor = question.top_distractor
    rows = [MetricRow("question", key, "answered", question.answered, question.text),
            MetricRow("question", key, "correct", question.correct, question.text),
            MetricRow("question", key, "correct_rate", csv_rate(question.correct_rate), question.text),
            MetricRow("question", key, "top_distractor", distractor.order if distractor else "",
                      distractor.text if distractor else "")]
    for choice in question.choices:
        choice_key = f"{key}.c{choice.order}"
        rows += [MetricRow("choice", choice_key, "picks", choice.picks, choice.text),
                 MetricRow("choice", choice_key, "pick_rate", csv_rate(choice.pick_rate), choice.text)]
    return rows


def _demo_rows(stats: ClassStats) -> list[MetricRow]:
    rows = []
    for demo in stats.demos:
        for subkey in ("total", "done", "cancelled", "error", "in_progress"):
            rows.append(MetricRow("demo", demo.demo, subkey, getattr(demo, subkey)))
        rows += [MetricRow("demo_error", demo.demo, code, count) for code, count in demo.error_codes.items()]
    return rows


def metric_rows(stats: ClassStats) -> list[MetricRow]:
    """Every number on the dashboard, in page order; the first two rows name the range."""
    date_range = stats.date_range
    rows = [MetricRow("range", "start", "", date_range.start.isoformat()),
            MetricRow("range", "end", "", date_range.end.isoformat())]
    rows += _learner_rows(stats) + _quiz_rows(stats)
    for question in stats.questions:
        rows += _question_rows(question)
    rows += [MetricRow(p.kind, p.key, subkey, "" if value is None else value, p.title) for p in stats.practice
             for subkey, value in (("started", p.started), (p.done_label, p.done),
                                   ("median_score_percent", p.median_score_percent))]
    return rows + _demo_rows(stats)


# --- Tables for the page ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cell:
    text: str
    numeric: bool = True  # right-aligned, tabular figures


@dataclass(frozen=True)
class Row:
    header: str  # the first cell, a <th scope="row">
    cells: list[Cell]


@dataclass(frozen=True)
class Table:
    caption: str
    columns: list[Cell]  # column headers, aligned as their cells; the first names the row headers
    rows: list[Row]
    empty: str = "Nothing in this range."


@dataclass(frozen=True)
class QuestionSection:
    title: str
    chart_id: str
    chart_label: str
    table: Table
    notes: list[str] = field(default_factory=list)


def _numbers(*values: object) -> list[Cell]:
    return [Cell(str(value)) for value in values]


def _columns(*labels: str, text: tuple[str, ...] = ()) -> list[Cell]:
    """The first label heads the row headers; the others are numeric unless named in `text`."""
    return [Cell(label, numeric=index > 0 and label not in text) for index, label in enumerate(labels)]


def learners_table(stats: ClassStats) -> Table:
    rows = [Row(g.label, _numbers(g.started, g.completed, g.quiz_attempts, g.quiz_takers)) for g in stats.groups]
    rows.append(Row("All learners", _numbers(stats.started, stats.completed, stats.quiz_attempts, stats.quiz_takers)))
    return Table("Learners by group: started (visited, completed or took the quiz in the range) and completed",
                 _columns("Group", "Started", "Completed", "Quiz attempts", "Learners who took the quiz"), rows)


def quiz_table(stats: ClassStats) -> Table:
    quiz = stats.quiz
    mean = DASH if quiz.mean_score_percent is None else f"{quiz.mean_score_percent:.1f} %"
    rows = [Row("Attempts", _numbers(quiz.attempts)),
            Row(f"Passed (at least {PASS_FRACTION:.0%} correct)", _numbers(quiz.passed)),
            Row("Pass rate", [Cell(percent(quiz.pass_rate))]),
            Row("Mean score", [Cell(mean)])]
    return Table("Quiz attempts in the range", _columns("Measure", "Value"), rows)


def questions_table(stats: ClassStats) -> Table:
    rows = []
    for question in stats.questions:
        distractor = question.top_distractor
        wrong = f"{distractor.order}. {distractor.text} ({distractor.picks})" if distractor else DASH
        rows.append(Row(f"{question.order}. {question.text}",
                        _numbers(question.answered, question.correct)
                        + [Cell(percent(question.correct_rate)), Cell(wrong, numeric=False)]))
    return Table("Per question: attempts that answered it and how many got it right",
                 _columns("Question", "Answered", "Correct", "% correct", "Most-picked wrong choice (picks)",
                          text=("Most-picked wrong choice (picks)",)), rows,
                 empty="This module has no quiz.")


def question_section(question: QuestionStats) -> QuestionSection:
    rows = [Row(f"{choice.order}. {choice.text}",
                [Cell("Correct" if choice.correct else "Wrong", numeric=False)]
                + _numbers(choice.picks) + [Cell(percent(choice.pick_rate))])
            for choice in question.choices]
    notes = ["More than one choice is correct: the rates add up to more than 100 %."] if question.multiple else []
    title = f"Question {question.order}: {question.text}"
    return QuestionSection(
        title=title, chart_id=f"class-chart-q{question.order}",
        chart_label=f"Bar chart of the share of answers picking each choice of question {question.order}; "
                    "the table below has the same numbers",
        table=Table(f"Answers to question {question.order} per choice ({question.answered} answered)",
                    _columns("Choice (authored order)", "Answer", "Picks", "% of answers", text=("Answer",)), rows),
        notes=notes,
    )


def demos_table(stats: ClassStats) -> Table:
    rows = []
    for demo in stats.demos:
        codes = ", ".join(f"{code} ({count})" for code, count in demo.error_codes.items()) or DASH
        rows.append(Row(demo.demo, _numbers(demo.total, demo.done, demo.cancelled, demo.error, demo.in_progress)
                        + [Cell(codes, numeric=False)]))
    return Table(f"Runs of the demos this lesson embeds, started in the range (all pages, {stats.population})",
                 _columns("Demo", "Runs", "Done", "Cancelled", "Failed", "In progress", "Error codes (runs)",
                          text=("Error codes (runs)",)), rows,
                 empty="This lesson embeds no demo.")


def practice_table(stats: ClassStats) -> Table:
    rows = [Row(f"{p.kind_label}: {p.title}", _numbers(p.started, p.done)
                + [Cell(DASH if p.median_score_percent is None else f"{p.median_score_percent:.1f} %")])
            for p in stats.practice]
    return Table(f"Labs (started: saved answers; done: submitted) and exercises (started: a graded run; done: "
                 f"passed) in the range ({stats.population})",
                 _columns("Lab or exercise", "Started", "Done", "Median score"), rows,
                 empty="This lesson has no lab or exercise.")


def _question_chart(question: QuestionStats) -> dict:
    distractor = question.top_distractor
    return {
        "chart_id": f"class-chart-q{question.order}",
        "title": f"Question {question.order}",
        "choices": [{"label": f"{c.order}. {c.text}", "rate": c.pick_rate, "picks": c.picks, "correct": c.correct,
                     "top_distractor": distractor is not None and c.order == distractor.order}
                    for c in question.choices],
    }


def chart_data(stats: ClassStats) -> dict:
    """What class-dashboard.js draws (passed with json_script); rates are fractions, None when undefined."""
    return {
        "questions": [_question_chart(question) for question in stats.questions],
        "demos_chart_id": "class-chart-demos",
        "demos": [{"demo": d.demo, "done": d.done, "cancelled": d.cancelled, "error": d.error,
                   "in_progress": d.in_progress} for d in stats.demos],
    }


# --- Views ------------------------------------------------------------------------------------------------

def csv_url(path: str, date_range: DateRange) -> str:
    """The CSV at `path` for the same range as the page."""
    query = urlencode({"start": date_range.start.isoformat(), "end": date_range.end.isoformat()})
    return f"{path}?{query}"


def dashboard_context(stats: ClassStats, csv_path: str) -> dict:
    """What dashboard.html shows for `stats`."""
    return {
        "stats": stats,
        "tables": {"learners": learners_table(stats), "quiz": quiz_table(stats),
                   "questions": questions_table(stats), "demos": demos_table(stats),
                   "practice": practice_table(stats)},
        "question_sections": [question_section(question) for question in stats.questions],
        "chart_data": chart_data(stats),
        "has_demo_chart": bool(stats.demos),
        "csv_url": csv_url(csv_path, stats.date_range),
    }


def _render(request, module: Module, population, csv_path: str, template: str, **extra):
    """The dashboard of `module` for the range in the query (400 with the reasons for a bad one)."""
    form = DateRangeForm.from_query(request.GET)
    context = {"module": module, "form": form, "time_zone": timezone.get_current_timezone_name(), **extra}
    if not form.is_valid():
        context["form_errors"] = form.error_messages()
        return render(request, template, context, status=400)
    students, label = population
    context.update(dashboard_context(class_stats(module, form.date_range, students, label), csv_path))
    return render(request, template, context)


def _csv(request, module: Module, population, name: str) -> HttpResponse:
    form = DateRangeForm.from_query(request.GET)
    if not form.is_valid():
        return HttpResponseBadRequest(" ".join(form.error_messages()), content_type="text/plain; charset=utf-8")
    students, label = population
    return metrics_csv_response(class_stats(module, form.date_range, students, label), name)


ALL_LEARNERS = (None, EVERYONE)  # (students, label) of the module-wide dashboard


def _cohort_population(cohort) -> tuple:
    return class_students(cohort), f"students of {cohort.name}"


@require_GET
@instructor_required
def module_dashboard(request, slug: str):
    """Everyone who used the module: signed-in users and anonymous visitors (as one group)."""
    module = get_object_or_404(Module.objects.select_related("track"), slug=slug)
    return _render(request, module, ALL_LEARNERS, reverse("classes:module_dashboard_csv", args=[module.slug]),
                   "classes/dashboard.html")


@require_GET
@instructor_required
def module_dashboard_csv(request, slug: str):
    module = get_object_or_404(Module, slug=slug)
    return _csv(request, module, ALL_LEARNERS, f"class-{module.slug}")


@require_GET
@teacher_required
def cohort_module_dashboard(request, cohort_id: int, slug: str):
    """The same dashboard counting the cohort's enrolled students only (404 for a cohort one does not teach)."""
    cohort = taught_cohort(request, cohort_id)
    module = get_object_or_404(Module.objects.select_related("track"), slug=slug)
    return _render(request, module, _cohort_population(cohort),
                   reverse("classes:module_figures_csv", args=[cohort.pk, module.slug]),
                   "classes/module_figures.html", cohort=cohort)


@require_GET
@teacher_required
def cohort_module_dashboard_csv(request, cohort_id: int, slug: str):
    cohort = taught_cohort(request, cohort_id)
    module = get_object_or_404(Module, slug=slug)
    return _csv(request, module, _cohort_population(cohort), f"cohort-{cohort.pk}-{module.slug}")


def metrics_csv_response(stats: ClassStats, name: str) -> HttpResponse:
    """Every number of the page as CSV, downloaded as `<name>-<start>-<end>.csv`."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    filename = f"{name}-{stats.date_range.start.isoformat()}-{stats.date_range.end.isoformat()}.csv"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    writer.writerows(row.cells() for row in metric_rows(stats))
    return response
