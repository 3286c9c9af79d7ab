"""The instructor's class flow in Chromium under the site's CSP (issue 28), with no admin page: create a cohort,
import 30 students from a CSV file, set a due date; one student sets their password from their link, sees the
due date and answers a quiz; the instructor opens the gradebook and reads that student's answers."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

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
    page.get_by_role("link", name="s07", exact=True).click()
    page.get_by_role("heading", name="Student 07").wait_for()
    answers = page.locator(".attempt-answers").first.inner_text()
    assert PRIMER_RIGHT in answers and "Correct" in answers
    assert "/admin/" not in page.url
    assert csp_violations == [] and page.errors == [], (csp_violations, page.errors)
