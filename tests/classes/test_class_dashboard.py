"""The class dashboard: its numbers equal counts made directly from seeded rows; the CSV has the same rows.

The seed (`SEED`) is plain data: every expectation below is computed from it by straightforward Python that
shares no code with `classes.stats`, plus a few hand-counted values as a check on that Python.
"""
from __future__ import annotations

import csv
import io
import math
import os
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from classes_helpers import log_in_instructor_in_browser
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from classes.dashboard import spreadsheet_safe
from classes.stats import DateRange

from courseapp.loader import load_course
from courseapp.models import Choice, Module, ModuleProgress, QuizAttempt
from demos.models import Run

pytestmark = pytest.mark.django_db
SCREENSHOT_DIR = os.environ.get("CLASS_DASHBOARD_SCREENSHOTS")  # set to look at the page

START, END = date(2025, 3, 1), date(2025, 3, 10)
QUERY = {"start": START.isoformat(), "end": END.isoformat()}


def at(day: int, hour: int = 12, minute: int = 0, second: int = 0, month: int = 3) -> datetime:
    return datetime(2025, month, day, hour, minute, second, tzinfo=dt_timezone.utc)


IN_FIRST = at(1, 0, 0, 0)  # the range's first instant
IN_LAST = at(10, 23, 59, 59)  # its last second
BEFORE = at(28, 23, 59, 59, month=2)  # just before it
AFTER = at(11, 0, 0, 0)  # just after it


def in_range(moment: datetime | None) -> bool:
    return moment is not None and START <= moment.astimezone(dt_timezone.utc).date() <= END


@dataclass
class P:  # a ModuleProgress row
    learner: str  # "u:<username>" or "v:<visitor id>"
    module: str
    visited: datetime
    completed: datetime | None = None


@dataclass
class A:  # a QuizAttempt row
    learner: str
    module: str
    created: datetime
    answers: object
    score: int
    total: int = 2


@dataclass
class R:  # a demo Run
    demo: str
    status: str
    created: datetime
    error_code: str = ""


# The "intro" fixture quiz: Q1 (one answer): 1 correct, 2 wrong. Q2 (several): 1 and 2 correct, 3 wrong.
SEED = {
    "progress": [
        P("u:ann", "intro", IN_LAST, IN_FIRST),  # started and completed
        P("u:bob", "intro", at(5)),  # started
        P("u:cat", "intro", AFTER, BEFORE),  # neither by progress; started by her attempt below
        P("u:dan", "intro", BEFORE),  # outside the range
        P("u:dan", "cache", at(5), at(5)),  # another module
        P("v:anon-a", "intro", at(3), at(4)),
        P("v:anon-b", "intro", at(6)),
        P("v:anon-c", "intro", AFTER),  # started by the attempt below
        P("v:anon-d", "intro", BEFORE),
    ],
    "attempts": [
        A("u:ann", "intro", at(2), {"1": [1], "2": [1, 2]}, 2),
        A("u:ann", "intro", at(3), {"1": [2], "2": [1]}, 0),
        A("u:bob", "intro", IN_LAST, {"1": [2], "2": [1, 3]}, 0),
        A("u:cat", "intro", IN_FIRST, {"1": [1], "2": [3]}, 1),
        A("u:dan", "intro", BEFORE, {"1": [2], "2": [3]}, 0),  # outside the range
        A("u:dan", "intro", AFTER, {"1": [2], "2": [3]}, 0),  # outside the range
        A("u:dan", "cache", at(5), {"1": [2]}, 0, 1),  # another module
        A("v:anon-a", "intro", at(4), {"1": [1], "2": [1, 2]}, 2),
        A("v:anon-a", "intro", at(4, 13), {"1": [1], "2": [2]}, 1),
        A("v:anon-b", "intro", at(7), {"1": [2]}, 0),  # skipped question 2
        A("v:anon-c", "intro", at(8), {"1": "x", "2": [9], "3": [1]}, 0),  # malformed: answers nothing
    ],
    "runs": [
        R("kv-cache", "done", IN_FIRST), R("kv-cache", "done", at(5)), R("kv-cache", "cancelled", at(5)),
        R("kv-cache", "error", at(6), "worker_lost"), R("kv-cache", "error", at(7), "worker_lost"),
        R("kv-cache", "error", IN_LAST), R("kv-cache", "queued", at(9)), R("kv-cache", "running", at(9)),
        R("kv-cache", "done", BEFORE), R("kv-cache", "error", AFTER, "queue_timeout"),  # outside
        R("prefill-decode", "done", at(2)),
        R("batching", "error", at(3), "worker_lost"),  # a demo intro does not embed
    ],
}
INTRO_DEMOS = [{"name": "kv-cache", "props": {}}, {"name": "prefill-decode", "props": {}},
               {"name": "kv-cache", "props": {"max_new_tokens": 4}}]  # embedded twice: counted once
CACHE_DEMOS = [{"name": "kv-cache", "props": {}}]


# --- Seeding ----------------------------------------------------------------------------------------------

def owner(learner: str) -> dict:
    kind, name = learner.split(":", 1)
    if kind == "u":
        return {"user": User.objects.get_or_create(username=name)[0], "visitor": ""}
    return {"user": None, "visitor": name}


def by_ids(module: Module, answers: object) -> object:
    """The seed's answers, written by position for reading, as stored: by question and choice id. A position
    the quiz lacks becomes an id it lacks, and a malformed value stays malformed."""
    if not isinstance(answers, dict):
        return answers
    questions = {str(q.order): q for q in module.questions.prefetch_related("choices")}
    stored = {}
    for position, picked in answers.items():
        question = questions.get(position)
        if question is None:
            stored[f"q-missing-{position}"] = picked
            continue
        choices = {c.order: c.key for c in question.choices.all()}
        stored[question.key] = ([choices.get(p, f"c-missing-{p}") for p in picked] if isinstance(picked, list)
                                else picked)
    return stored


def seed_rows() -> dict:
    modules = {m.slug: m for m in Module.objects.all()}
    Module.objects.filter(slug="intro").update(demos=INTRO_DEMOS)
    Module.objects.filter(slug="cache").update(demos=CACHE_DEMOS)
    for p in SEED["progress"]:
        row = ModuleProgress.objects.create(module=modules[p.module], **owner(p.learner))
        # visited_at is auto_now: only a queryset update can set it.
        ModuleProgress.objects.filter(pk=row.pk).update(visited_at=p.visited, completed_at=p.completed)
    for a in SEED["attempts"]:
        row = QuizAttempt.objects.create(module=modules[a.module], score=a.score, total=a.total,
                                         answers=by_ids(modules[a.module], a.answers), **owner(a.learner))
        QuizAttempt.objects.filter(pk=row.pk).update(created_at=a.created)
    for r in SEED["runs"]:
        row = Run.objects.create(demo=r.demo, status=r.status, error_code=r.error_code, owner="s:test")
        Run.objects.filter(pk=row.pk).update(created_at=r.created)
    return SEED


@pytest.fixture
def seeded(course):
    return seed_rows()


@pytest.fixture
def author(client, course, instructor):
    client.force_login(instructor)
    return client


# --- Expectations, counted directly from the seed ---------------------------------------------------------

def group_of(learner: str) -> str:
    return "signed_in" if learner.startswith("u:") else "anonymous"


def expected_learners(module: str = "intro") -> dict[tuple[str, str], int]:
    progress = [p for p in SEED["progress"] if p.module == module]
    attempts = [a for a in SEED["attempts"] if a.module == module and in_range(a.created)]
    result = {}
    for group in ("signed_in", "anonymous"):
        started = {p.learner for p in progress if group_of(p.learner) == group
                   and (in_range(p.visited) or in_range(p.completed))}
        started |= {a.learner for a in attempts if group_of(a.learner) == group}
        mine = [a for a in attempts if group_of(a.learner) == group]
        result[group, "started"] = len(started)
        result[group, "completed"] = len({p.learner for p in progress
                                          if group_of(p.learner) == group and in_range(p.completed)})
        result[group, "quiz_attempts"] = len(mine)
        result[group, "quiz_takers"] = len({a.learner for a in mine})
    for measure in ("started", "completed", "quiz_attempts", "quiz_takers"):
        result["total", measure] = result["signed_in", measure] + result["anonymous", measure]
    return result


def intro_attempts() -> list[A]:
    return [a for a in SEED["attempts"] if a.module == "intro" and in_range(a.created)]


def expected_quiz() -> dict[str, object]:
    attempts = intro_attempts()
    passed = sum(a.score >= math.ceil(a.total * 0.8) for a in attempts)
    return {"attempts": len(attempts), "passed": passed, "pass_rate": round(passed / len(attempts), 4),
            "mean_score_percent": round(sum(100 * a.score / a.total for a in attempts) / len(attempts), 2)}


def picks_of(answers: object, question: int) -> set[int]:
    """What a student picked, keeping only the choices the question has (1 to 2, or 1 to 3)."""
    valid = {1: {1, 2}, 2: {1, 2, 3}}[question]
    chosen = answers.get(str(question)) if isinstance(answers, dict) else None
    return set(chosen) & valid if isinstance(chosen, list) else set()


def expected_questions() -> dict[int, dict]:
    correct_sets = {1: {1}, 2: {1, 2}}
    result = {}
    for q, correct_set in correct_sets.items():
        answered = [picks_of(a.answers, q) for a in intro_attempts() if picks_of(a.answers, q)]
        n_choices = 2 if q == 1 else 3
        picks = {c: sum(c in chosen for chosen in answered) for c in range(1, n_choices + 1)}
        wrong = {c: n for c, n in picks.items() if c not in correct_set and n}
        result[q] = {
            "answered": len(answered),
            "correct": sum(chosen == correct_set for chosen in answered),
            "picks": picks,
            "top_distractor": max(wrong, key=lambda c: (wrong[c], -c)) if wrong else None,
        }
    return result


def expected_demos(names: list[str]) -> dict[str, dict]:
    result = {}
    for name in names:
        runs = [r for r in SEED["runs"] if r.demo == name and in_range(r.created)]
        count = {s: sum(r.status == s for r in runs) for s in ("done", "cancelled", "error")}
        codes: dict[str, int] = {}
        for r in runs:
            if r.status == "error":
                codes[r.error_code or "(no code)"] = codes.get(r.error_code or "(no code)", 0) + 1
        result[name] = {"total": len(runs), **count, "in_progress": len(runs) - sum(count.values()), "codes": codes}
    return result


def test_the_direct_counts_are_what_a_person_counts_by_hand():
    """A check on the test's own arithmetic, against the seed read by eye."""
    assert expected_learners() == {
        ("signed_in", "started"): 3, ("signed_in", "completed"): 1, ("signed_in", "quiz_attempts"): 4,
        ("signed_in", "quiz_takers"): 3, ("anonymous", "started"): 3, ("anonymous", "completed"): 1,
        ("anonymous", "quiz_attempts"): 4, ("anonymous", "quiz_takers"): 3, ("total", "started"): 6,
        ("total", "completed"): 2, ("total", "quiz_attempts"): 8, ("total", "quiz_takers"): 6}
    assert expected_quiz()["attempts"] == 8 and expected_quiz()["passed"] == 2
    assert expected_questions()[1] == {"answered": 7, "correct": 4, "picks": {1: 4, 2: 3}, "top_distractor": 2}
    assert expected_questions()[2] == {"answered": 6, "correct": 2, "picks": {1: 4, 2: 3, 3: 2}, "top_distractor": 3}
    assert expected_demos(["kv-cache"])["kv-cache"] == {
        "total": 8, "done": 2, "cancelled": 1, "error": 3, "in_progress": 2,
        "codes": {"worker_lost": 2, "(no code)": 1}}


# --- The dashboard ----------------------------------------------------------------------------------------

def dashboard(client, slug: str = "intro", **query):
    return client.get(reverse("classes:module_dashboard", args=[slug]), query or QUERY)


def test_dashboard_numbers_equal_direct_counts(author, seeded):
    response = dashboard(author)
    assert response.status_code == 200
    stats = response.context["stats"]
    assert (stats.date_range.start, stats.date_range.end) == (START, END)

    learners = expected_learners()
    for group in stats.groups:
        for measure in ("started", "completed", "quiz_attempts", "quiz_takers"):
            assert getattr(group, measure) == learners[group.key, measure], (group.key, measure)
    for measure in ("started", "completed", "quiz_attempts", "quiz_takers"):
        assert getattr(stats, measure) == learners["total", measure], measure

    quiz = expected_quiz()
    assert (stats.quiz.attempts, stats.quiz.passed) == (quiz["attempts"], quiz["passed"])
    assert round(stats.quiz.pass_rate, 4) == quiz["pass_rate"]
    assert round(stats.quiz.mean_score_percent, 2) == quiz["mean_score_percent"]

    questions = expected_questions()
    assert [q.order for q in stats.questions] == [1, 2]
    for question in stats.questions:
        want = questions[question.order]
        assert (question.answered, question.correct) == (want["answered"], want["correct"])
        assert {c.order: c.picks for c in question.choices} == want["picks"]
        assert {c.order: c.pick_rate for c in question.choices} == {
            c: n / want["answered"] for c, n in want["picks"].items()}
        assert question.top_distractor.order == want["top_distractor"]

    demos = expected_demos(["kv-cache", "prefill-decode"])
    assert [d.demo for d in stats.demos] == ["kv-cache", "prefill-decode"]  # embedded twice, listed once
    for demo in stats.demos:
        want = demos[demo.demo]
        assert (demo.total, demo.done, demo.cancelled, demo.error, demo.in_progress) == (
            want["total"], want["done"], want["cancelled"], want["error"], want["in_progress"])
        assert demo.error_codes == want["codes"]


def test_dashboard_html_shows_the_numbers_in_captioned_tables(author, seeded):
    html = dashboard(author).content.decode()
    learners = expected_learners()
    signed_in = "".join(f'<td class="num">{learners["signed_in", m]}</td>'
                        for m in ("started", "completed", "quiz_attempts", "quiz_takers"))
    assert f'<th scope="row">Signed-in students</th>{signed_in}</tr>' in html
    anonymous = "".join(f'<td class="num">{learners["anonymous", m]}</td>'
                        for m in ("started", "completed", "quiz_attempts", "quiz_takers"))
    assert f'<th scope="row">Anonymous visitors (one group)</th>{anonymous}</tr>' in html
    assert html.count("<caption>") == 5 + 2  # learners, quiz, questions, labs and exercises, demos, one per question
    q1 = expected_questions()[1]
    assert (f'<th scope="row">2. Once, like training.</th><td>Wrong</td><td class="num">{q1["picks"][2]}</td>'
            f'<td class="num">{100 * q1["picks"][2] / q1["answered"]:.1f} %</td>') in html
    assert "2. Once, like training. (3)" in html  # question 1's most-picked wrong choice
    kv = expected_demos(["kv-cache"])["kv-cache"]
    assert (f'<th scope="row">kv-cache</th><td class="num">{kv["total"]}</td><td class="num">{kv["done"]}</td>'
            f'<td class="num">{kv["cancelled"]}</td><td class="num">{kv["error"]}</td>'
            f'<td class="num">{kv["in_progress"]}</td><td>worker_lost (2), (no code) (1)</td>') in html
    # Charts: a file module reads the numbers from json_script (the CSP allows no inline script).
    assert 'id="class-dashboard-data" type="application/json"' in html
    assert 'src="/static/js/class-dashboard.js"' in html and 'id="class-chart-q1"' in html
    assert 'id="class-chart-demos"' in html
    assert "<script>" not in html


def test_chart_data_matches_the_tables(author, seeded):
    data = dashboard(author).context["chart_data"]
    q1 = expected_questions()[1]
    choices = data["questions"][0]["choices"]
    assert [(c["picks"], c["correct"], c["top_distractor"]) for c in choices] == [
        (q1["picks"][1], True, False), (q1["picks"][2], False, True)]
    kv = expected_demos(["kv-cache"])["kv-cache"]
    assert data["demos"][0] == {"demo": "kv-cache", "done": kv["done"], "cancelled": kv["cancelled"],
                                "error": kv["error"], "in_progress": kv["in_progress"]}


def test_a_demo_embedded_in_two_modules_counts_for_both(author, seeded):
    stats = dashboard(author, "cache", **QUERY).context["stats"]
    assert [d.demo for d in stats.demos] == ["kv-cache"]
    assert stats.demos[0].total == expected_demos(["kv-cache"])["kv-cache"]["total"]
    assert stats.questions == []  # the cache module has no quiz (Dan's attempt predates its removal)
    assert stats.quiz.attempts == sum(a.module == "cache" and in_range(a.created) for a in SEED["attempts"])
    assert stats.groups[0].started == stats.groups[0].completed == 1  # Dan, and no one from intro


def test_a_module_with_no_activity_shows_dashes_not_errors(author, seeded):
    response = dashboard(author, "batching")
    stats = response.context["stats"]
    assert stats.started == stats.quiz.attempts == 0 and stats.demos == []
    assert stats.quiz.pass_rate is None and stats.quiz.mean_score_percent is None
    html = response.content.decode()
    assert "This lesson embeds no demo." in html and 'id="class-chart-demos"' not in html
    assert '<th scope="row">Pass rate</th><td class="num">–</td>' in html


def test_the_date_range_filters(author, seeded):
    just_the_last_day = dashboard(author, start=END.isoformat(), end=END.isoformat()).context["stats"]
    # On 10 March: Ann's last visit, Bob's attempt and one kv-cache run, which failed.
    assert [(g.key, g.started) for g in just_the_last_day.groups] == [("signed_in", 2), ("anonymous", 0)]
    assert just_the_last_day.quiz.attempts == 1
    assert just_the_last_day.demos[0].total == 1 and just_the_last_day.demos[0].error == 1
    wide = dashboard(author, start="2025-01-01", end="2025-12-31").context["stats"]
    assert wide.quiz.attempts == sum(a.module == "intro" for a in SEED["attempts"])
    assert wide.demos[0].total == sum(r.demo == "kv-cache" for r in SEED["runs"])
    assert wide.groups[0].started == 4 and wide.groups[1].started == 4  # every intro learner


def test_the_default_range_is_the_last_30_days(author, seeded):
    intro = Module.objects.get(slug="intro")
    QuizAttempt.objects.create(module=intro, score=1, total=2, answers=by_ids(intro, {"1": [1]}), visitor="today")
    old = QuizAttempt.objects.create(module=intro, score=1, total=2, answers=by_ids(intro, {"1": [1]}),
                                     visitor="long-ago")
    QuizAttempt.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=31))
    response = author.get(reverse("classes:module_dashboard", args=["intro"]))
    stats = response.context["stats"]
    today = timezone.localdate()
    assert (stats.date_range.start, stats.date_range.end) == (today - timedelta(days=29), today)
    assert stats.quiz.attempts == 1 and stats.groups[1].quiz_takers == 1
    assert f'value="{today.isoformat()}"' in response.content.decode()


@pytest.mark.parametrize("query, message", [
    ({"start": "2025-13-01", "end": "2025-03-10"}, "From: Enter a valid date."),
    ({"start": "yesterday"}, "From: Enter a valid date."),
    ({"start": "2025-03-10", "end": "2025-03-01"}, "The start date is after the end date."),
    ({"start": "0001-01-01", "end": "9999-12-31"}, "Enter a date from 2000-01-01 to 2999-12-31."),
])
def test_a_bad_range_is_a_400_with_the_reason(author, seeded, query, message):
    response = author.get(reverse("classes:module_dashboard", args=["intro"]), query)
    assert response.status_code == 400
    html = response.content.decode()
    assert message in html and 'class="error-summary"' in html and "class-dashboard-data" not in html
    csv_response = author.get(reverse("classes:module_dashboard_csv", args=["intro"]), query)
    assert csv_response.status_code == 400 and message in csv_response.content.decode()


def test_an_unknown_module_is_404(author):
    assert dashboard(author, "ghost").status_code == 404
    assert author.get(reverse("classes:module_dashboard_csv", args=["ghost"])).status_code == 404


# --- CSV --------------------------------------------------------------------------------------------------

def csv_rows(client, slug: str = "intro", query: dict | None = None) -> list[list[str]]:
    response = client.get(reverse("classes:module_dashboard_csv", args=[slug]), query or QUERY)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith(f'attachment; filename="class-{slug}-')
    return list(csv.reader(io.StringIO(response.content.decode())))


def expected_csv_values() -> dict[tuple[str, str, str], str]:
    """(section, key, subkey) → value, as the CSV writes it, from the direct counts."""
    want: dict[tuple[str, str, str], object] = {("range", "start", ""): "2025-03-01", ("range", "end", ""): "2025-03-10"}
    for (group, measure), n in expected_learners().items():
        want["learners", group, measure] = n
    for measure, value in expected_quiz().items():
        want["quiz", measure, ""] = value
    for q, stats in expected_questions().items():
        want["question", f"q{q}", "answered"] = stats["answered"]
        want["question", f"q{q}", "correct"] = stats["correct"]
        want["question", f"q{q}", "correct_rate"] = round(stats["correct"] / stats["answered"], 4)
        want["question", f"q{q}", "top_distractor"] = stats["top_distractor"]
        for c, n in stats["picks"].items():
            want["choice", f"q{q}.c{c}", "picks"] = n
            want["choice", f"q{q}.c{c}", "pick_rate"] = round(n / stats["answered"], 4)
    for name, stats in expected_demos(["kv-cache", "prefill-decode"]).items():
        for measure in ("total", "done", "cancelled", "error", "in_progress"):
            want["demo", name, measure] = stats[measure]
        for code, n in stats["codes"].items():
            want["demo_error", name, code] = n
    return {key: str(value) for key, value in want.items()}


def test_csv_rows_equal_the_direct_counts(author, seeded):
    response = author.get(reverse("classes:module_dashboard_csv", args=["intro"]), QUERY)
    assert response["Content-Disposition"] == 'attachment; filename="class-intro-2025-03-01-2025-03-10.csv"'
    rows = csv_rows(author)
    assert rows[0] == ["section", "key", "subkey", "value", "label"]
    got = {(section, key, subkey): value for section, key, subkey, value, _ in rows[1:]}
    assert len(got) == len(rows) - 1  # no metric twice
    assert got == expected_csv_values()


def test_csv_has_a_row_for_every_number_on_the_page(author, seeded):
    """The same `ClassStats` feeds both: every table number is one of the CSV's values for it."""
    stats = dashboard(author).context["stats"]
    got = {(section, key, subkey): value for section, key, subkey, value, _ in csv_rows(author)[1:]}
    for group in stats.groups:
        assert got["learners", group.key, "started"] == str(group.started)
        assert got["learners", group.key, "completed"] == str(group.completed)
    for question in stats.questions:
        for choice in question.choices:
            assert got["choice", f"q{question.order}.c{choice.order}", "picks"] == str(choice.picks)
    for demo in stats.demos:
        assert got["demo", demo.demo, "error"] == str(demo.error)


def test_csv_labels_name_what_each_row_counts(author, seeded):
    labels = {(section, key, subkey): label for section, key, subkey, _, label in csv_rows(author)[1:]}
    assert labels["learners", "anonymous", "started"] == "Anonymous visitors (one group)"
    assert labels["question", "q1", "answered"] == "When does inference run?"
    assert labels["question", "q1", "top_distractor"] == "Once, like training."
    assert labels["choice", "q2.c3", "picks"] == "Decode is compute-bound at batch 1."


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralized(author, seeded):
    Choice.objects.filter(question__module__slug="intro", question__order=1, order=2).update(
        text='=HYPERLINK("http://evil.example","click")')
    Choice.objects.filter(question__module__slug="intro", question__order=2, order=3).update(text="@SUM(A1:A9)")
    Run.objects.create(demo="kv-cache", status="error", error_code="+cmd|' /C calc'!A0", owner="s:x")
    rows = csv_rows(author, query={"start": START.isoformat(), "end": timezone.localdate().isoformat()})
    cells = [cell for row in rows for cell in row]
    assert "'=HYPERLINK(\"http://evil.example\",\"click\")" in cells
    assert "'@SUM(A1:A9)" in cells and "'+cmd|' /C calc'!A0" in cells
    assert not any(cell.startswith(("=", "+", "-", "@")) for cell in cells)


def test_spreadsheet_safe_leaves_numbers_and_plain_text_alone():
    assert spreadsheet_safe(3) == 3 and spreadsheet_safe(0.25) == 0.25
    assert spreadsheet_safe("kv-cache") == "kv-cache"
    assert spreadsheet_safe("-1 token") == "'-1 token" and spreadsheet_safe("\tx") == "'\tx"


# --- Who may see it ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["classes:module_dashboard", "classes:module_dashboard_csv"])
def test_a_student_gets_403(client, seeded, student, name):
    client.force_login(student)
    assert client.get(reverse(name, args=["intro"]), QUERY).status_code == 403


@pytest.mark.parametrize("name", ["classes:module_dashboard", "classes:module_dashboard_csv"])
def test_anonymous_is_sent_to_log_in(client, seeded, name):
    response = client.get(reverse(name, args=["intro"]), QUERY)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_the_authoring_list_links_each_module_to_its_class_dashboard(author):
    html = author.get(reverse("authoring:list")).content.decode()
    for slug in ("intro", "cache", "batching"):
        link = reverse("classes:module_dashboard", args=[slug])
        assert f'href="{link}"' in html
        assert author.get(link).status_code == 200


@pytest.mark.parametrize("old, new", [("authoring:class", "classes:module_dashboard"),
                                      ("authoring:class_csv", "classes:module_dashboard_csv")])
def test_the_old_dashboard_urls_redirect_with_their_range(author, old, new):
    response = author.get(reverse(old, args=["intro"]), QUERY)
    assert response.status_code == 301
    assert response["Location"] == f"{reverse(new, args=['intro'])}?start={START.isoformat()}&end={END.isoformat()}"


def test_date_range_rejects_a_reversed_range():
    with pytest.raises(ValueError):
        DateRange(END, START)
    assert DateRange(START, END).days == 10


# --- In Chromium, under the site's CSP --------------------------------------------------------------------

@pytest.mark.browser
@pytest.mark.timeout(120)
def test_charts_draw_under_the_csp(transactional_db, content_dir, live_server, csp_page):
    load_course(content_dir)
    seed_rows()
    page = csp_page
    log_in_instructor_in_browser(page, live_server.url,
                                 "/classes/modules/intro/%3Fstart%3D2025-03-01%26end%3D2025-03-10")
    page.locator("#class-chart-q2 .trace.bars").first.wait_for()
    page.locator("#class-chart-demos .trace.bars").first.wait_for()
    # Question 2: one trace per kind of choice (correct, most-picked wrong), one bar per choice.
    assert page.locator("#class-chart-q2 .trace.bars").count() == 2
    assert page.locator("#class-chart-q2 .trace.bars .point").count() == 3
    assert page.locator("#class-chart-demos .trace.bars").count() == 4  # done, cancelled, failed, in progress
    assert page.locator("#class-chart-q1 .legendtext").all_text_contents() == ["Correct", "Most-picked wrong"]
    if SCREENSHOT_DIR:
        page.screenshot(path=f"{SCREENSHOT_DIR}/class-dashboard.png", full_page=True)
    assert page.errors == [], page.errors
