"""Issue 42: a due date is shown in its cohort's time zone, and to a student in their own (the browser's) beside it:
a student reading in Tokyo a date their New York cohort set, in Chromium under the site's CSP."""
from __future__ import annotations

from datetime import datetime
from datetime import timezone as dt_timezone

import pytest
from django.contrib.auth.models import User

from classes.models import Cohort, DueDate, Enrollment
from courseapp.models import Module

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tokyo_page(chromium):
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, timezone_id="Asia/Tokyo")
    page = context.new_page()
    yield page
    context.close()


def test_a_student_reads_their_cohorts_due_date_in_its_zone_and_their_own(live_server, course, tokyo_page):
    cohort = Cohort.objects.create(name="NY section", time_zone="America/New_York")
    student = User.objects.create_user("kenji", password="kenji-pass-123")
    Enrollment.objects.create(cohort=cohort, user=student, source=Enrollment.Source.INVITE)
    DueDate.objects.create(cohort=cohort, module=Module.objects.get(slug="intro"),
                           due_at=datetime(2027, 3, 1, 22, 0, tzinfo=dt_timezone.utc))  # 17:00 in New York
    page = tokyo_page
    page.goto(f"{live_server.url}/accounts/login/?next=/classes/")
    page.get_by_label("Username").fill("kenji")
    page.get_by_label("Password").fill("kenji-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/classes/")
    row = page.locator("table.classes-table tbody tr").first
    assert "Mon 1 Mar 2027, 17:00 (America/New_York)" in row.inner_text()
    local = row.locator("[data-local-time]")
    local.wait_for(state="visible")
    assert local.inner_text().strip() == "In your time zone (Asia/Tokyo): Tue 2 Mar 2027, 07:00."

    page.goto(f"{live_server.url}/modules/intro/")
    notice = page.locator(".due-notice")
    assert "due Mon 1 Mar 2027, 17:00 (America/New_York)" in notice.inner_text()
    notice.locator("[data-local-time]").wait_for(state="visible")
    assert "In your time zone (Asia/Tokyo): Tue 2 Mar 2027, 07:00." in notice.inner_text()
