"""The instructor's class flow in Chromium under the site's CSP (issue 28), with no admin page: create a cohort,
import 30 students from a CSV file, set a due date; one student sets their password from their link, sees the
due date and answers a quiz; the instructor opens the gradebook and reads that student's answers."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, Permission, User

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

SCREENSHOT_DIR = os.environ.get("CLASSES_SCREENSHOTS")  # set to look at the pages
AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"  # as in test_pages_read_well.py
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa"]
AXE_RUN = """(tags) => axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})
  .then((r) => r.violations.filter((v) => ['serious', 'critical'].includes(v.impact))
    .map((v) => `${v.id} (${v.impact}): ` + v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ')))"""

STUDENTS = 30
PRIMER_RIGHT = "A list of token numbers from a fixed vocabulary, each then looked up as a vector of numbers."


def make_instructor() -> None:
    """As `manage.py makeinstructor` would (the group is recreated: transactional tests flush it)."""
    teacher = User.objects.create_user("teacher", password="teacher-pass-123")
    group, _ = Group.objects.get_or_create(name="instructor")
    group.permissions.add(Permission.objects.get(codename="instructor", content_type__app_label="courseapp"))
    teacher.groups.add(group)


def log_in(page, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/accounts/login/?next=/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/")


def axe_problems(chromium, base: str, username: str, password: str, paths: list[str]) -> dict[str, list[str]]:
    """Serious or critical WCAG A/AA violations (axe-core) on each page, seen by `username`. Its own context
    bypasses the CSP, which would refuse the injected axe script."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    page = context.new_page()
    found = {}
    try:
        log_in(page, base, username, password)
        for path in paths:
            page.goto(f"{base}{path}")
            page.add_script_tag(path=str(AXE))
            if problems := page.evaluate(AXE_RUN, WCAG):
                found[path] = problems
    finally:
        context.close()
    return found


def test_an_instructor_runs_a_class_without_the_admin(real_course, csp_page, csp_violations, chromium, tmp_path):
    base, page = real_course, csp_page
    make_instructor()
    log_in(page, base, "teacher", "teacher-pass-123")

    # A cohort, from the "Classes" link in the site's navigation.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Classes").click()
    page.get_by_label("Cohort name").fill("Spring 2027, section B")
    page.get_by_role("button", name="Create cohort").click()
    page.get_by_role("heading", name="Spring 2027, section B", level=1).wait_for()
    assert "/classes/join/" in page.locator(".invite-link").inner_text()

    # 30 students from a CSV file.
    roster = tmp_path / "section-b.csv"
    roster.write_text("username,email,name\n" + "".join(
        f"s{n:02d},s{n:02d}@school.example,Student {n:02d}\n" for n in range(1, STUDENTS + 1)), encoding="utf-8")
    page.get_by_label("CSV file").set_input_files(str(roster))
    page.get_by_role("button", name="Import", exact=True).click()
    summary = page.locator("#import-summary")
    summary.wait_for()
    assert summary.inner_text() == f"{STUDENTS} lines imported: {STUDENTS} new accounts."
    assert page.locator("#import-rows tbody tr").count() == STUDENTS
    link = page.get_by_role("row", name="s07").locator("code").inner_text()
    assert "/accounts/reset/" in link

    # A due date for the primer, three days from now.
    page.get_by_role("link", name="← Spring 2027, section B").click()
    assert page.locator("#roster tbody tr").count() == STUDENTS
    page.get_by_label("Module", exact=True).select_option(label="Primer: tokens, attention, queries, keys and values")
    page.get_by_label("Due (date and time)").fill("2099-06-30T17:00")
    page.get_by_role("button", name="Set due date").click()
    page.get_by_role("status").filter(has_text="is due 2099-06-30 17:00").wait_for()
    if SCREENSHOT_DIR:
        page.screenshot(path=f"{SCREENSHOT_DIR}/cohort.png", full_page=True)

    # Student s07, in a browser of their own: their link, a password, the due date, the quiz.
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    student = context.new_page()
    try:
        student.goto(link)
        student.get_by_role("heading", name="Choose your password").wait_for()
        student.get_by_label("New password", exact=True).fill("s07-Long-pass-42")
        student.get_by_label("New password confirmation").fill("s07-Long-pass-42")
        student.get_by_role("button", name="Set my password").click()
        student.get_by_role("heading", name="Your password is set").wait_for()
        log_in(student, base, "s07", "s07-Long-pass-42")
        assert student.locator(".course-map .due-badge.due-due").count() == 1
        student.goto(f"{base}/modules/primer/")
        assert "due Tue 30 Jun 2099, 17:00" in student.locator(".due-notice").inner_text()
        student.get_by_label(PRIMER_RIGHT).check()
        student.get_by_role("button", name="Check my answers").click()
        student.locator(".verdict").first.wait_for()
    finally:
        context.close()

    # The instructor reads s07's answer in the gradebook.
    page.get_by_role("link", name="Gradebook", exact=True).click()
    assert page.locator("table.gradebook tbody tr").count() == STUDENTS
    if SCREENSHOT_DIR:
        page.screenshot(path=f"{SCREENSHOT_DIR}/gradebook.png", full_page=True)
    page.get_by_role("link", name="Student 07", exact=True).click()  # the gradebook names people by name
    page.get_by_role("heading", name="Student 07").wait_for()
    answers = page.locator(".attempt-answers").first.inner_text()
    assert PRIMER_RIGHT in answers and "Correct" in answers
    if SCREENSHOT_DIR:
        page.screenshot(path=f"{SCREENSHOT_DIR}/student.png", full_page=True)
    assert "/admin/" not in page.url
    assert csp_violations == [] and page.errors == [], (csp_violations, page.errors)

    # Every page of the walk reads well (axe-core): the instructor's and the student's.
    cohort = page.url.split("/classes/")[1].split("/")[0]
    teacher_pages = ["/classes/", f"/classes/{cohort}/", f"/classes/{cohort}/gradebook/", page.url.split(base)[1],
                     f"/classes/{cohort}/modules/primer/figures/"]
    assert axe_problems(chromium, base, "teacher", "teacher-pass-123", teacher_pages) == {}
    assert axe_problems(chromium, base, "s07", "s07-Long-pass-42", ["/", "/modules/primer/", "/classes/"]) == {}
