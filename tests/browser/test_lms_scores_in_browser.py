"""The gradebook's LMS score states in Chromium under the site's CSP: a teacher reads why the LMS refused a score
(the disclosure opened from the keyboard), presses Resend, and the cell says pending; the page has no serious WCAG
violation with the disclosure open (axe-core)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.test import Client

from courseapp.loader import load_course
from lti import scores
from lti.models import Context, ScorePost

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lti"))
from lti_platform import LEARNER, Platform, launch, post_quiz  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

FIXTURE_COURSE = Path(__file__).resolve().parents[1] / "courseapp" / "fixtures" / "valid"
AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
AXE_RUN = """() => axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']},
  resultTypes: ['violations']}).then((r) => r.violations.filter((v) => ['serious', 'critical'].includes(v.impact))
  .map((v) => v.id + ': ' + v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ')))"""


@pytest.fixture
def refused_score(transactional_db, live_server, tmp_path):
    """A student launched the intro module from the LMS and answered its quiz; the LMS refused the score (400).
    Score jobs go to a broker nobody listens on (none here, and never a Redis left running on this machine): the
    posts wait for a worker's sweep."""
    from inferencelab.celery import app

    before, app.conf.broker_url = app.conf.broker_url, "redis://127.0.0.1:9/0"
    shutil.copytree(FIXTURE_COURSE, tmp_path / "content")
    load_course(tmp_path / "content")
    platform = Platform()
    browser = Client()
    call_command("lti_add_platform", title="Test LMS", issuer=platform.issuer, client_id=platform.client_id,
                 login_url=platform.login_url, token_url=platform.token_url, jwks_url=platform.jwks_url,
                 deployment=[platform.deployment_id])
    platform.tool_jwks = browser.get("/lti/jwks/").json()
    assert launch(browser, platform, platform.resource_claims("stu-web", LEARNER, module="intro")).status_code == 302
    post_quiz(browser, "intro", {"q1": "1", "q2": ["1", "2"]})
    platform.score_status = 400
    post = ScorePost.objects.get()
    scores.send(post.pk)
    teacher = User.objects.create_user("section-teacher", password="teacher-pass-123")
    group, _ = Group.objects.get_or_create(name="instructor")
    group.permissions.add(Permission.objects.get(codename="instructor", content_type__app_label="courseapp"))
    teacher.groups.add(group)
    cohort = Context.objects.get().cohort
    cohort.instructors.add(teacher)
    yield live_server.url, cohort, post
    platform.close()
    app.conf.broker_url = before


def log_in(page, base: str) -> None:
    page.goto(f"{base}/accounts/login/?next=/")
    page.get_by_label("Username").fill("section-teacher")
    page.get_by_label("Password").fill("teacher-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/")


def test_a_teacher_reads_the_lms_answer_and_resends(refused_score, csp_page, csp_violations, chromium):
    base, cohort, post = refused_score
    page = csp_page
    log_in(page, base)
    page.goto(f"{base}/classes/{cohort.pk}/gradebook/")
    summary = page.locator("details.lms-score summary")
    assert summary.inner_text() == "LMS: failed"
    answer = page.locator("details.lms-score li")
    assert not answer.is_visible()
    summary.focus()
    page.keyboard.press("Enter")  # a disclosure opens from the keyboard
    assert answer.is_visible() and "HTTP 400" in answer.inner_text() and "score refused" in answer.inner_text()
    assert "HTTP 400" in summary.get_attribute("title")  # and on hover

    page.get_by_role("button", name="Resend 2/2 to the LMS").click()
    page.wait_for_url(f"{base}/classes/{cohort.pk}/gradebook/")
    assert "queued to be sent to the LMS again" in page.content()
    assert page.locator("details.lms-score summary").inner_text() == "LMS: pending"
    post.refresh_from_db()
    assert post.state == ScorePost.State.PENDING
    assert csp_violations == []

    # axe-core in a context that lets its script in (the CSP page above proves the page itself needs no exception)
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    try:
        checker = context.new_page()
        log_in(checker, base)
        ScorePost.objects.filter(pk=post.pk).update(state=ScorePost.State.FAILED)
        checker.goto(f"{base}/classes/{cohort.pk}/gradebook/")
        checker.locator("details.lms-score summary").click()
        checker.add_script_tag(path=str(AXE))
        assert checker.evaluate(AXE_RUN) == []
    finally:
        context.close()
