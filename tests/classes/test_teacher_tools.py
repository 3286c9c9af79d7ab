"""Issue 42: a section teacher's own tools, no superuser, over real HTTP (a live server, `requests`) as that teacher,
each refused for the teacher of another cohort: rename / time zone / archive a cohort, a student's name and
e-mail, a set-password link for a student who forgot theirs (single use), per-student due-date extensions."""
from __future__ import annotations

import re
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from classes_helpers import make_teacher
from django.contrib.auth.models import User
from django.utils import timezone
from test_credentials_over_http import Browser

from classes.models import Cohort, DueDate, DueDateExtension, Enrollment, ProvisionedAccount
from courseapp.models import Module
from lti.models import Identity

pytestmark = pytest.mark.django_db(transaction=True)
LINK = re.compile(r"https?://[^\s<\"]+/accounts/reset/[^\s<\"]+/")


@pytest.fixture
def section(course):
    """Alice teaches her section (Noor, made by its import; Sam, who signed up himself; Lee, from an LMS);
    Mallory teaches another."""
    alice, mallory = make_teacher("alice"), make_teacher("mallory")
    cohort, other = Cohort.objects.create(name="Section A"), Cohort.objects.create(name="Section M")
    cohort.instructors.add(alice)
    other.instructors.add(mallory)
    noor = User.objects.create_user("noor", first_name="Noor", email="noor@school.example")
    noor.set_unusable_password()
    noor.save()
    ProvisionedAccount.objects.create(user=noor, cohort=cohort, created_by=alice)
    sam = User.objects.create_user("sam", password="sam-pass-4242", email="sam@home.example")
    lee = User.objects.create_user("lti-3f9a1c0d2e", first_name="Lee", email="lee@school.example")
    Identity.objects.create(issuer="https://lms.school.example", subject="lee-42", user=lee)
    for user, source in ((noor, Enrollment.Source.IMPORT), (sam, Enrollment.Source.INVITE),
                         (lee, Enrollment.Source.LTI)):
        Enrollment.objects.create(cohort=cohort, user=user, source=source)
    return {"cohort": cohort, "other": other, "noor": noor, "sam": sam, "lee": lee}


def signed_in(live_server, username: str) -> Browser:
    browser = Browser(live_server.url)
    assert browser.log_in(username, f"{username}-pass-123").status_code == 302
    return browser


def test_a_teacher_renames_archives_and_sets_the_time_zone_of_their_cohort(live_server, section):
    cohort, alice, mallory = section["cohort"], signed_in(live_server, "alice"), signed_in(live_server, "mallory")
    settings_url = f"/classes/{cohort.pk}/settings/"
    wanted = {"settings-name": "Section A (spring)", "settings-time_zone": "America/New_York",
              "settings-archived": "on"}
    assert mallory.post(settings_url, wanted).status_code == 404
    cohort.refresh_from_db()
    assert (cohort.name, cohort.time_zone, cohort.archived) == ("Section A", "", False)

    assert alice.post(settings_url, {**wanted, "settings-time_zone": "Mars/Olympus"}).status_code == 302
    assert "is not a time zone name" in alice.get(f"/classes/{cohort.pk}/").text
    cohort.refresh_from_db()
    assert cohort.time_zone == ""

    assert alice.post(settings_url, wanted).status_code == 302
    cohort.refresh_from_db()
    assert (cohort.name, cohort.time_zone, cohort.archived, cohort.joining_open) == (
        "Section A (spring)", "America/New_York", True, False)
    home = alice.get("/classes/").text
    assert "Section A (spring)</a> <span class=\"meta\">(archived)</span>" in home
    assert section["noor"].enrollments.filter(cohort=cohort).exists()  # archiving keeps everyone

    # Due dates are typed and shown in the cohort's time zone (17:00 in New York is 22:00 UTC in March).
    intro = Module.objects.get(slug="intro")
    assert alice.post(f"/classes/{cohort.pk}/due-dates/", {"due-module": intro.pk,
                                                          "due-due_at": "2027-03-01T17:00"}).status_code == 302
    assert DueDate.objects.get(cohort=cohort).due_at == datetime(2027, 3, 1, 22, 0, tzinfo=dt_timezone.utc)
    page = alice.get(f"/classes/{cohort.pk}/").text
    assert "Mon 1 Mar 2027, 17:00" in page and "In the cohort's time zone (America/New_York)" in page
    assert "Due 1 Mar 2027, 17:00" in alice.get(f"/classes/{cohort.pk}/gradebook/").text


def test_a_teacher_corrects_a_students_name_and_the_email_of_an_account_their_import_made(live_server, section):
    cohort, alice, mallory = section["cohort"], signed_in(live_server, "alice"), signed_in(live_server, "mallory")
    noor, sam = section["noor"], section["sam"]
    details = f"/classes/{cohort.pk}/students/{noor.pk}/details/"
    fixed = {"details-first_name": "Noor", "details-last_name": "Khan", "details-email": "noor.khan@school.example"}
    assert mallory.post(details, fixed).status_code == 404
    assert alice.post(details, fixed).status_code == 302
    noor.refresh_from_db()
    assert (noor.get_full_name(), noor.email) == ("Noor Khan", "noor.khan@school.example")

    # Sam made his own account: his name, yes; his e-mail (where his reset mail goes), only he changes.
    sams = f"/classes/{cohort.pk}/students/{sam.pk}/details/"
    refused = alice.post(sams, {"details-first_name": "Sam", "details-last_name": "",
                                "details-email": "a@evil.example"})
    assert refused.status_code == 400 and "Only the student changes this account" in refused.text
    assert alice.post(sams, {"details-first_name": "Sam", "details-last_name": "Lowe",
                             "details-email": "sam@home.example"}).status_code == 302
    sam.refresh_from_db()
    assert (sam.get_full_name(), sam.email) == ("Sam Lowe", "sam@home.example")
    taken = alice.post(details, {**fixed, "details-email": "SAM@home.example"})
    assert taken.status_code == 400 and "Another account has this e-mail" in taken.text
    # Mallory cannot reach Alice's students through her own cohort either.
    assert mallory.post(f"/classes/{section['other'].pk}/students/{noor.pk}/details/", fixed).status_code == 404


def test_a_set_password_link_for_a_student_who_forgot_works_once(live_server, section):
    cohort, alice, mallory = section["cohort"], signed_in(live_server, "alice"), signed_in(live_server, "mallory")
    noor = section["noor"]
    noor.set_password("first-pass-9876")  # she took her account over, signed in, then forgot the password
    noor.last_login = timezone.now() - timedelta(days=3)
    noor.save()
    link_url = f"/classes/{cohort.pk}/students/{noor.pk}/password-link/"
    assert mallory.post(link_url, {}).status_code == 404
    assert mallory.post(f"/classes/{section['other'].pk}/students/{noor.pk}/password-link/", {}).status_code == 404
    page = alice.post(link_url, {})
    assert page.status_code == 200 and "no-store" in page.headers.get("Cache-Control", "")
    link = LINK.search(page.text).group(0)

    noors = Browser(live_server.url)
    form = noors.http.get(link, timeout=30)
    assert form.status_code == 200 and "new_password1" in form.text
    done = noors.post(form.url, {"new_password1": "second-pass-5432", "new_password2": "second-pass-5432"})
    assert done.status_code == 302
    noor.refresh_from_db()
    assert noor.check_password("second-pass-5432")
    again = Browser(live_server.url).http.get(link, timeout=30)
    assert "new_password1" not in again.text  # used: it no longer works

    # No link for an account its owner made, nor for one that signs in through an LMS.
    for user in (section["sam"], section["lee"]):
        refused = alice.post(f"/classes/{cohort.pk}/students/{user.pk}/password-link/", {})
        assert refused.status_code == 302 and not LINK.search(alice.get(refused.headers["Location"]).text)


def test_a_student_gets_their_own_due_date(live_server, section):
    cohort, alice, mallory = section["cohort"], signed_in(live_server, "alice"), signed_in(live_server, "mallory")
    noor, sam = section["noor"], section["sam"]
    due = DueDate.objects.create(cohort=cohort, module=Module.objects.get(slug="intro"),
                                 due_at=timezone.now() - timedelta(days=1))
    later = (timezone.localtime(timezone.now() + timedelta(days=7))).strftime("%Y-%m-%dT%H:%M")
    extension_url = f"/classes/{cohort.pk}/students/{noor.pk}/extensions/"
    wanted = {"extension-due_date": due.pk, "extension-due_at": later}
    assert mallory.post(extension_url, wanted).status_code == 404
    assert not DueDateExtension.objects.exists()
    assert alice.post(extension_url, wanted).status_code == 302
    extension = DueDateExtension.objects.get()
    assert (extension.user, extension.due_date) == (noor, due)

    book = alice.get(f"/classes/{cohort.pk}/gradebook/").text
    rows = {name: book[book.index(f">{name}</a>"):].split("</tr>")[0] for name in ("Noor", "sam")}
    assert "Due " in rows["Noor"] and ">Late<" not in rows["Noor"]
    assert ">Late<" in rows["sam"]

    # The student sees their own date: Noor's Classes page lists the module as due, Sam's as late.
    from django.test import Client

    for user, state in ((noor, "due-due"), (sam, "due-late")):
        client = Client()
        client.force_login(user)
        assert state in client.get("/classes/").content.decode()

    other_extension = f"/classes/{cohort.pk}/students/{noor.pk}/extensions/{extension.pk}/remove/"
    assert mallory.post(other_extension, {}).status_code == 404
    assert alice.post(other_extension, {}).status_code == 302
    assert not DueDateExtension.objects.exists()
