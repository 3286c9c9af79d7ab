"""Issue 42, roster sync: the cohort follows the LMS's class list (the test platform's NRPS endpoint, over HTTP)
on the `cpu` worker's schedule (its pass, `lti.roster.sync_due`; tests/lti/test_roster_worker.py runs the real
worker) and on a teacher's demand. Students the LMS no longer lists are marked inactive, never deleted. The LMS's
grade columns' end dates are read with it as due dates."""
from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from lti_platform import INSTRUCTOR, LEARNER, launch, post_quiz

from classes.models import Cohort, DueDate, Enrollment
from courseapp.models import QuizAttempt
from lti import roster
from lti.models import Context, Identity

PASS = {"q1": "1", "q2": ["1", "2"]}


def member(user_id, role=LEARNER, status="Active"):
    return {"user_id": user_id, "roles": [role], "status": status, "given_name": user_id.title(),
            "family_name": "Roster", "email": f"{user_id}@school.example"}


def due_now() -> None:
    """The schedule's time has come (instead of waiting LTI_ROSTER_SYNC_EVERY)."""
    Context.objects.update(roster_next_at=timezone.now() - timedelta(seconds=1))


def enrolled(cohort, active=True) -> list[str]:
    return sorted(cohort.enrollments.filter(active=active).values_list("user__lti_identities__subject", flat=True))


def teacher_launch(client, platform):
    response = launch(client, platform, platform.resource_claims("teach-r", INSTRUCTOR, module="intro", nrps=True))
    assert response.status_code == 302
    return Cohort.objects.get()


def test_the_sweep_marks_students_the_lms_dropped_inactive_and_keeps_their_work(client, course, platform):
    platform.roster = [[member("r-1"), member("r-2")], [member("r-3"), member("teach-r", INSTRUCTOR)]]
    cohort = teacher_launch(client, platform)
    assert enrolled(cohort) == ["r-1", "r-2", "r-3"]
    context = Context.objects.get()
    assert context.memberships_url.endswith("/memberships?page=0") and context.roster_next_at > timezone.now()
    student = Client()
    launch(student, platform, platform.resource_claims("r-2", LEARNER, module="intro"))
    assert post_quiz(student, "intro", PASS).status_code == 200

    # Not due yet: the sweep reads nobody's list.
    platform.roster = [[member("r-1"), member("r-3", status="Inactive"), member("teach-r", INSTRUCTOR)]]
    assert roster.sync_due() == (0, 0)
    due_now()
    assert roster.sync_due() == (1, 0)
    assert enrolled(cohort) == ["r-1"] and enrolled(cohort, active=False) == ["r-2", "r-3"]
    r2 = Identity.objects.get(subject="r-2").user
    assert QuizAttempt.objects.filter(user=r2).count() == 1  # their work stays
    assert Enrollment.objects.get(user=r2).left_at is not None

    page = client.get(reverse("classes:gradebook", args=[cohort.pk])).content.decode()
    rows = page[page.index("<tbody>"):]
    assert rows.index("R-1 Roster") < rows.index("R-3 Roster") and rows.index("R-1") < rows.index("R-2")  # left: last
    assert rows.count("Inactive: left the LMS course") == 2
    book = list(csv.reader(io.StringIO(client.get(reverse("classes:gradebook_csv", args=[cohort.pk]))
                                       .content.decode())))
    left = {line[0]: line[book[0].index("left_lms_course")] for line in book[1:]}
    assert left[r2.username] and not left[Identity.objects.get(subject="r-1").user.username]
    assert "2 marked as having left" in Context.objects.get().roster_answer

    # Back in the LMS course: their own launch makes them active again.
    launch(student, platform, platform.resource_claims("r-2", LEARNER, module="intro"))
    assert enrolled(cohort) == ["r-1", "r-2"]


def test_a_students_launch_is_enough_for_the_sweep_to_fill_the_cohort(client, course, platform):
    platform.roster = [[member("s-1"), member("s-2"), member("t-1", INSTRUCTOR)]]
    launch(client, platform, platform.resource_claims("s-1", LEARNER, module="intro", nrps=True))
    cohort = Cohort.objects.get()
    assert enrolled(cohort) == ["s-1"]  # a student's launch reads no list
    assert roster.sync_due() == (1, 0)  # never read yet: due at once
    assert enrolled(cohort) == ["s-1", "s-2"]
    assert list(cohort.instructors.values_list("lti_identities__subject", flat=True)) == ["t-1"]


def test_a_roster_that_cannot_be_read_changes_nothing_and_is_tried_again_later(client, course, platform):
    platform.roster = [[member("r-1"), member("r-2"), member("teach-r", INSTRUCTOR)]]
    cohort = teacher_launch(client, platform)
    platform.nrps_down = True
    due_now()
    assert roster.sync_due() == (0, 1)
    context = Context.objects.get()
    assert enrolled(cohort) == ["r-1", "r-2"] and context.roster_answer.startswith("Not read")
    assert timezone.now() < context.roster_next_at < timezone.now() + timedelta(hours=1)
    platform.nrps_down = False
    platform.roster = [[]]  # an LMS listing nobody is not believed
    due_now()
    assert roster.sync_due() == (0, 1) and enrolled(cohort) == ["r-1", "r-2"]


def test_a_teacher_the_lms_dropped_stops_teaching_but_the_last_one_stays(client, course, platform):
    platform.roster = [[member("r-1"), member("teach-r", INSTRUCTOR), member("ta", INSTRUCTOR)]]
    cohort = teacher_launch(client, platform)
    assert sorted(cohort.instructors.values_list("lti_identities__subject", flat=True)) == ["ta", "teach-r"]
    platform.roster = [[member("r-1"), member("teach-r", INSTRUCTOR), member("ta", LEARNER)]]
    due_now()
    roster.sync_due()
    assert list(cohort.instructors.values_list("lti_identities__subject", flat=True)) == ["teach-r"]
    assert enrolled(cohort) == ["r-1", "ta"]
    platform.roster = [[member("r-1")]]
    due_now()
    roster.sync_due()
    assert list(cohort.instructors.values_list("lti_identities__subject", flat=True)) == ["teach-r"]


def test_the_cohort_pages_button_syncs_for_its_teacher_only(client, course, platform):
    platform.roster = [[member("r-1"), member("teach-r", INSTRUCTOR)]]
    cohort = teacher_launch(client, platform)
    page = client.get(reverse("classes:cohort", args=[cohort.pk])).content.decode()
    sync_url = reverse("lti:roster_sync", args=[cohort.pk])
    assert f'action="{sync_url}"' in page and "Sync the class list from the LMS" in page

    platform.roster = [[member("r-1", status="Deleted"), member("r-9"), member("teach-r", INSTRUCTOR)]]
    other_teacher, student = Client(), Client()
    other = Cohort.objects.create(name="Another section")
    other.instructors.add(User.objects.create_user("other-teacher"))
    other_teacher.force_login(User.objects.get(username="other-teacher"))
    assert other_teacher.post(sync_url).status_code == 404
    launch(student, platform, platform.resource_claims("r-1", LEARNER, module="intro"))
    assert student.post(sync_url).status_code == 403
    assert client.get(sync_url).status_code == 405
    assert enrolled(cohort) == ["r-1"]  # nobody else's request read the list

    response = client.post(sync_url, follow=True)
    assert response.redirect_chain[-1][0] == reverse("classes:cohort", args=[cohort.pk])
    page = response.content.decode()
    assert "Class list from the LMS: 1 student newly enrolled, 1 marked as having left" in page
    assert enrolled(cohort) == ["r-9"] and enrolled(cohort, active=False) == ["r-1"]
    roster_table = page[page.index('id="roster"'):]
    assert "Inactive: left the LMS course" in roster_table

    # A cohort no LMS course runs has no list to read.
    own = Cohort.objects.create(name="Local section")
    own.instructors.add(Identity.objects.get(subject="teach-r").user)
    assert client.post(reverse("lti:roster_sync", args=[own.pk])).status_code == 404


def test_the_lms_grade_columns_end_date_is_the_modules_due_date(client, course, platform):
    platform.roster = [[member("r-1"), member("teach-r", INSTRUCTOR)]]
    column = f"{platform.base}/lineitems/7"
    platform.lineitems = [{"id": column, "label": "Intro", "scoreMaximum": 2, "endDateTime": "2027-05-01T12:00:00Z"}]
    claims = platform.resource_claims("teach-r", INSTRUCTOR, module="intro", nrps=True)
    ags = next(key for key in claims if key.endswith("lti-ags/claim/endpoint"))
    claims[ags]["scope"].append("https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly")
    assert launch(client, platform, claims).status_code == 302
    due = DueDate.objects.get()
    assert (due.cohort, due.module.slug) == (Cohort.objects.get(), "intro")
    assert due.due_at == datetime(2027, 5, 1, 12, 0, tzinfo=dt_timezone.utc)

    platform.lineitems[0]["endDateTime"] = "2027-05-08T09:30:00+02:00"  # moved in the LMS
    due_now()
    assert roster.sync_due() == (1, 0)
    assert DueDate.objects.get().due_at == datetime(2027, 5, 8, 7, 30, tzinfo=dt_timezone.utc)
    del platform.lineitems[0]["endDateTime"]  # no end date in the LMS: the cohort's stays
    due_now()
    roster.sync_due()
    assert DueDate.objects.get().due_at == datetime(2027, 5, 8, 7, 30, tzinfo=dt_timezone.utc)


def test_without_the_read_scope_no_column_is_read(client, course, platform):
    platform.roster = [[member("r-1"), member("teach-r", INSTRUCTOR)]]
    platform.lineitems = [{"id": f"{platform.base}/lineitems/7", "endDateTime": "2027-05-01T12:00:00Z"}]
    assert launch(client, platform, platform.resource_claims("teach-r", INSTRUCTOR, module="intro",
                                                             nrps=True)).status_code == 302
    assert not DueDate.objects.exists()
