"""Credentials stay with their owner, tried over real HTTP (a live server, `requests`) as a second instructor:
every takeover and enrolment-without-consent path is refused, and what stays allowed still works.

The attacker, "mallory", is an instructor with a cohort of her own. The victims: an account an LTI launch made
(`lti-<hash>`, no password, its username computable from issuer and subject), a student another instructor's
import made who has not set a password yet, and a student with a password and quiz attempts.
"""
from __future__ import annotations

import csv
import io
import re
from urllib.parse import urljoin

import pytest
import requests
from classes_helpers import make_teacher, take_quiz
from django.contrib.auth.models import User

from classes.models import Cohort, Enrollment, ProvisionedAccount
from lti.models import Identity

pytestmark = pytest.mark.django_db(transaction=True)
LINK = re.compile(r"/accounts/reset/[^\s<\",]+/")


class Browser:
    """One person's browser: a cookie jar, and forms posted with their CSRF token, as a page would."""

    def __init__(self, base: str):
        self.base, self.http = base, requests.Session()

    def get(self, path: str, **kwargs) -> requests.Response:
        return self.http.get(urljoin(self.base, path), timeout=30, **kwargs)

    def post(self, path: str, data: dict) -> requests.Response:
        token = self.http.cookies.get("csrftoken") or self._fresh_token()
        return self.http.post(urljoin(self.base, path), data={**data, "csrfmiddlewaretoken": token},
                              headers={"Referer": urljoin(self.base, path)}, allow_redirects=False, timeout=30)

    def _fresh_token(self) -> str:
        self.get("/accounts/login/")
        return self.http.cookies["csrftoken"]

    def log_in(self, username: str, password: str) -> requests.Response:
        return self.post("/accounts/login/", {"username": username, "password": password})


@pytest.fixture
def people(course):
    alice, mallory = make_teacher("alice"), make_teacher("mallory")
    alices, mallorys = Cohort.objects.create(name="Alice's section"), Cohort.objects.create(name="Section M")
    alices.instructors.add(alice)
    mallorys.instructors.add(mallory)
    lti_user = User.objects.create_user("lti-3f9a1c0d2e", first_name="Lee", email="lee@school.example")
    lti_user.set_unusable_password()
    lti_user.save()
    Identity.objects.create(issuer="https://lms.school.example", subject="lee-42", user=lti_user)
    Enrollment.objects.create(cohort=alices, user=lti_user, source=Enrollment.Source.LTI)
    studious = User.objects.create_user("sam", password="sam-pass-4242", email="sam@home.example")
    Enrollment.objects.create(cohort=alices, user=studious, source=Enrollment.Source.INVITE)
    take_quiz(studious, "intro", {"q-when": ["c-once"]}, score=0)
    return {"alice": alice, "mallory": mallory, "alices": alices, "mallorys": mallorys,
            "lti_user": lti_user, "sam": studious}


def _mallory(live_server) -> Browser:
    browser = Browser(live_server.url)
    assert browser.log_in("mallory", "mallory-pass-123").status_code == 302
    return browser


def _links_csv(browser: Browser, cohort: Cohort) -> list[list[str]]:
    response = browser.get(f"/classes/{cohort.pk}/students/set-password-links.csv")
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(response.text)))[1:]


def _import(browser: Browser, cohort: Cohort, text: str) -> requests.Response:
    return browser.post(f"/classes/{cohort.pk}/students/import/", {"roster-text": text})


def test_importing_an_lti_account_gives_no_link_no_enrolment_and_no_sign_in(live_server, people):
    mallory, lti_user, cohort = _mallory(live_server), people["lti_user"], people["mallorys"]
    result = _import(mallory, cohort, f"username\n{lti_user.username}\n")
    assert result.status_code == 200 and "Invited" in result.text
    assert "Lee" not in result.text and "lee@school.example" not in result.text  # nothing about the account
    assert not LINK.search(result.text)
    assert not cohort.enrollments.filter(user=lti_user).exists()
    assert _links_csv(mallory, cohort) == []
    # The one-row form is the same path.
    result = mallory.post(f"/classes/{cohort.pk}/students/add/",
                          {"student-username": lti_user.username, "student-email": "", "student-name": ""})
    assert result.status_code == 200 and not LINK.search(result.text)
    # Nothing she can reach names the account: not the student page, not the gradebook.
    assert mallory.get(f"/classes/{cohort.pk}/students/{lti_user.pk}/").status_code == 404
    assert lti_user.username not in mallory.get(f"/classes/{cohort.pk}/gradebook.csv").text
    lti_user.refresh_from_db()
    assert not lti_user.has_usable_password()


def test_an_lti_account_enrolled_by_its_own_launch_still_gets_no_link(live_server, people):
    """Even its own cohort's instructor never gets a password link for an account with an LTI identity."""
    alice = Browser(live_server.url)
    assert alice.log_in("alice", "alice-pass-123").status_code == 302
    assert all(people["lti_user"].username != row[0] for row in _links_csv(alice, people["alices"]))


def test_a_student_another_instructors_import_made_cannot_be_taken_over(live_server, people):
    alice = Browser(live_server.url)
    assert alice.log_in("alice", "alice-pass-123").status_code == 302
    made = _import(alice, people["alices"], "username,email,name\nnoor,noor@school.example,Noor K\n")
    assert made.status_code == 200 and LINK.search(made.text)
    assert [row[0] for row in _links_csv(alice, people["alices"])] == ["noor"]

    mallory = _mallory(live_server)
    result = _import(mallory, people["mallorys"], "username\nnoor\n")
    assert result.status_code == 200 and not LINK.search(result.text) and "noor@school.example" not in result.text
    assert _links_csv(mallory, people["mallorys"]) == []
    # Alice's link for Noor is only Alice's to hand out, and dies once Noor has signed in.
    noor_link = LINK.search(made.text).group(0)
    noor = Browser(live_server.url)
    form = noor.get(noor_link)
    assert form.status_code == 200 and "Choose your password" in form.text
    assert noor.post(form.url, {"new_password1": "n00r-Long-pass", "new_password2": "n00r-Long-pass"}).status_code == 302
    assert _links_csv(alice, people["alices"]) == []
    assert "no longer works" in Browser(live_server.url).get(noor_link).text


def test_an_existing_student_is_invited_and_read_only_after_accepting(live_server, people):
    mallory, sam, cohort = _mallory(live_server), people["sam"], people["mallorys"]
    result = _import(mallory, cohort, "username,email,name\nsam,guess@wrong.example,Guess\n")
    assert result.status_code == 200 and "Invited" in result.text  # the email is not compared: no oracle
    assert "sam@home.example" not in result.text
    assert not cohort.enrollments.filter(user=sam).exists()
    assert mallory.get(f"/classes/{cohort.pk}/students/{sam.pk}/").status_code == 404
    assert "sam" not in [row[0] for row in csv.reader(io.StringIO(mallory.get(
        f"/classes/{cohort.pk}/gradebook.csv").text))]
    page = mallory.get(f"/classes/{cohort.pk}/").text
    assert "Invited, not yet accepted (1)" in page and "sam@home.example" not in page
    sam.refresh_from_db()
    assert (sam.email, sam.first_name) == ("sam@home.example", "")  # the import touched nothing

    # Sam sees the invitation in his own session; nobody else can answer it.
    invitation = cohort.invitations.get(user=sam)
    other = Browser(live_server.url)
    assert other.log_in("alice", "alice-pass-123").status_code == 302
    assert other.post(f"/classes/invitations/{invitation.pk}/", {"answer": "accept"}).status_code == 404
    student = Browser(live_server.url)
    assert student.log_in("sam", "sam-pass-4242").status_code == 302
    assert "Section M" in student.get("/classes/").text
    assert student.post(f"/classes/invitations/{invitation.pk}/", {"answer": "accept"}).status_code == 302
    assert cohort.enrollments.filter(user=sam, source=Enrollment.Source.INVITE).exists()
    assert mallory.get(f"/classes/{cohort.pk}/students/{sam.pk}/").status_code == 200
    assert _links_csv(mallory, cohort) == []  # a member with a password of his own: still no link


def test_a_declined_invitation_leaves_nothing(live_server, people):
    mallory, sam, cohort = _mallory(live_server), people["sam"], people["mallorys"]
    _import(mallory, cohort, "username\nsam\n")
    student = Browser(live_server.url)
    student.log_in("sam", "sam-pass-4242")
    invitation = cohort.invitations.get(user=sam)
    assert student.post(f"/classes/invitations/{invitation.pk}/", {"answer": "decline"}).status_code == 302
    assert not cohort.invitations.exists() and not cohort.enrollments.filter(user=sam).exists()
    assert "Invited, not yet accepted" not in mallory.get(f"/classes/{cohort.pk}/").text


def test_moving_ones_own_student_between_sections_needs_no_invitation(live_server, people):
    """An instructor who already teaches a student enrolls them in another of their cohorts directly."""
    second = Cohort.objects.create(name="Alice's second section")
    second.instructors.add(people["alice"])
    alice = Browser(live_server.url)
    alice.log_in("alice", "alice-pass-123")
    result = _import(alice, second, "username\nsam\n")
    assert result.status_code == 200 and "Your student in another cohort, enrolled" in result.text
    assert second.enrollments.filter(user=people["sam"]).exists()


def test_links_are_refused_for_any_account_the_import_did_not_make(people):
    """The guard under the views: `set_password_link` itself refuses, whoever calls it."""
    from django.test import RequestFactory

    from classes import roster

    request = RequestFactory().get("/")
    for user in (people["lti_user"], people["sam"]):
        with pytest.raises(PermissionError):
            roster.set_password_link(request, user, people["alices"])
    made = User.objects.create_user("made")
    made.set_unusable_password()
    made.save()
    ProvisionedAccount.objects.create(user=made, cohort=people["alices"])
    assert roster.set_password_link(request, made, people["alices"]).startswith("http://testserver/accounts/reset/")
    with pytest.raises(PermissionError):  # another cohort's instructors never
        roster.set_password_link(request, made, people["mallorys"])
