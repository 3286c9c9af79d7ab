"""Classes through real HTTP (Django's test client): who may see what, enrolling by invite code and by CSV
(all or nothing, with every problem named by its line), due dates and lateness, announcements, the gradebook,
and class figures that count a cohort's enrolled students only."""
from __future__ import annotations

import csv
import io
import re
from datetime import timedelta

import pytest
from classes_helpers import take_quiz
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from classes import deadlines
from classes.models import Announcement, Cohort, DueDate, Enrollment
from courseapp.models import Module, ModuleProgress, QuizAttempt
from courseapp.progress import Learner, mark_complete
from demos.models import Run

pytestmark = pytest.mark.django_db
RIGHT = {"q-when": ["c-every-request"], "q-which": ["c-decode-memory-bound", "c-prefill-parallel"]}
WRONG = {"q-when": ["c-once"], "q-which": ["c-decode-compute-bound"]}


@pytest.fixture
def cohort(course, teacher, student):
    cohort = Cohort.objects.create(name="Spring A")
    cohort.instructors.add(teacher)
    Enrollment.objects.create(cohort=cohort, user=student, source=Enrollment.Source.INVITE)
    return cohort


@pytest.fixture
def other_cohort(course, other_teacher):
    cohort = Cohort.objects.create(name="Spring B")
    cohort.instructors.add(other_teacher)
    return cohort


def logged_in(client, user):
    client.force_login(user)
    return client


def cohort_urls(cohort: Cohort, student: User) -> list[tuple[str, str]]:
    pk = cohort.pk
    return [
        ("get", reverse("classes:cohort", args=[pk])),
        ("get", reverse("classes:gradebook", args=[pk])),
        ("get", reverse("classes:gradebook_csv", args=[pk])),
        ("get", reverse("classes:student", args=[pk, student.pk])),
        ("get", reverse("classes:password_links_csv", args=[pk])),
        ("get", reverse("classes:module_figures", args=[pk, "intro"])),
        ("get", reverse("classes:module_figures_csv", args=[pk, "intro"])),
        ("post", reverse("classes:roster_import", args=[pk])),
        ("post", reverse("classes:student_add", args=[pk])),
        ("post", reverse("classes:student_remove", args=[pk, student.pk])),
        ("post", reverse("classes:due_date_set", args=[pk])),
        ("post", reverse("classes:announcement_create", args=[pk])),
        ("post", reverse("classes:invite_reset", args=[pk])),
        ("post", reverse("classes:instructor_add", args=[pk])),
        ("post", reverse("classes:instructor_remove", args=[pk, cohort.instructors.first().pk])),
    ]


# --- Permissions ------------------------------------------------------------------------------------------

def test_a_student_cannot_see_the_gradebook_or_any_cohort_page(client, cohort, student):
    logged_in(client, student)
    for method, url in cohort_urls(cohort, student):
        assert getattr(client, method)(url).status_code == 403, url
    assert Enrollment.objects.filter(cohort=cohort, user=student).exists()  # the POSTs changed nothing


def test_anonymous_visitors_are_sent_to_log_in(client, cohort, student):
    for method, url in cohort_urls(cohort, student):
        response = getattr(client, method)(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login")), url


def test_an_instructor_of_cohort_b_cannot_see_or_change_cohort_a(client, cohort, other_cohort, other_teacher,
                                                                  student):
    logged_in(client, other_teacher)
    for method, url in cohort_urls(cohort, student):
        assert getattr(client, method)(url).status_code == 404, url
    assert Enrollment.objects.filter(cohort=cohort, user=student).exists()
    assert cohort.invite_code == Cohort.objects.get(pk=cohort.pk).invite_code
    home = client.get(reverse("classes:home")).content.decode()
    assert "Spring B" in home and "Spring A" not in home


def test_an_instructor_creates_a_cohort_and_teaches_it(client, course, teacher):
    logged_in(client, teacher)
    response = client.post(reverse("classes:cohort_create"), {"cohort-name": "Autumn"})
    cohort = Cohort.objects.get(name="Autumn")
    assert response.status_code == 302 and response["Location"] == cohort.get_absolute_url()
    assert list(cohort.instructors.all()) == [teacher]
    page = client.get(cohort.get_absolute_url()).content.decode()
    assert cohort.invite_code in page and f"/classes/join/{cohort.invite_code}/" in page
    assert client.post(reverse("classes:cohort_create"), {"cohort-name": ""}).status_code == 400


def test_a_student_cannot_create_a_cohort(client, course, student):
    logged_in(client, student)
    assert client.post(reverse("classes:cohort_create"), {"cohort-name": "Mine"}).status_code == 403
    assert not Cohort.objects.exists()


def test_a_co_instructor_added_by_username_sees_the_cohort(client, cohort, teacher, other_teacher, student):
    logged_in(client, teacher)
    assert client.post(reverse("classes:instructor_add", args=[cohort.pk]),
                       {"instructor-username": "student"}).status_code == 400  # not an instructor
    client.post(reverse("classes:instructor_add", args=[cohort.pk]), {"instructor-username": "other-teacher"})
    logged_in(client, other_teacher)
    assert client.get(reverse("classes:gradebook", args=[cohort.pk])).status_code == 200
    # Either may remove the other, but the last one stays.
    client.post(reverse("classes:instructor_remove", args=[cohort.pk, teacher.pk]))
    assert list(cohort.instructors.all()) == [other_teacher]
    client.post(reverse("classes:instructor_remove", args=[cohort.pk, other_teacher.pk]))
    assert list(cohort.instructors.all()) == [other_teacher]
    logged_in(client, teacher)
    assert client.get(reverse("classes:gradebook", args=[cohort.pk])).status_code == 404


# --- CSV import -------------------------------------------------------------------------------------------

def import_csv(client, cohort, text: str, *, as_file: bool = False):
    url = reverse("classes:roster_import", args=[cohort.pk])
    if as_file:
        return client.post(url, {"roster-file": SimpleUploadedFile("class.csv", text.encode("utf-8"),
                                                                   "text/csv")})
    return client.post(url, {"roster-text": text})


def test_a_csv_import_creates_accounts_without_passwords_and_invites_existing_ones(client, cohort, teacher, student):
    User.objects.create_user("existing", email="ex@example.org")
    logged_in(client, teacher)
    text = ("Username,E-mail,Full name,Student number\n"
            "ada,ada@example.org,Ada Lovelace,1\n"
            "\n"
            "existing,,Someone,2\n"
            "student,,,3\n")
    response = import_csv(client, cohort, text, as_file=True)
    assert response.status_code == 200
    html = response.content.decode()
    ada = User.objects.get(username="ada")
    assert (ada.email, ada.first_name, ada.last_name) == ("ada@example.org", "Ada", "Lovelace")
    assert not ada.has_usable_password()
    # "existing" had an account before: invited, not enrolled, and its name and email are not shown.
    assert set(cohort.enrollments.values_list("user__username", flat=True)) == {"ada", "student"}
    assert cohort.invitations.filter(user__username="existing").exists()
    assert "New account, enrolled" in html and "Invited: joins when the account" in html
    assert "ex@example.org" not in html and "1 invitation sent" in html
    assert "Already in this cohort (unchanged)" in html and "Columns not used: Student number" in html
    # The set-password link is shown, works once, and leads to a working login.
    link = re.search(r"http://testserver(/accounts/reset/[^<\s]+/)", html).group(1)
    client.logout()  # the student, in their own browser
    form_page = client.get(link, follow=True)
    assert form_page.status_code == 200 and "Choose your password" in form_page.content.decode()
    assert "<strong>ada</strong>" in form_page.content.decode()
    done = client.post(form_page.redirect_chain[-1][0],
                       {"new_password1": "a-Long-pass-42", "new_password2": "a-Long-pass-42"})
    assert done.status_code == 302
    logged = client.post(reverse("login"), {"username": "ada", "password": "a-Long-pass-42"})
    assert logged.status_code == 302 and client.get(reverse("classes:home")).context["user"].username == "ada"
    assert "no longer works" in client.get(link, follow=True).content.decode()


def test_the_set_password_links_csv_lists_the_accounts_the_import_made(client, cohort, teacher):
    logged_in(client, teacher)
    import_csv(client, cohort, "username,email,name\nbo,bo@example.org,Bo Li\n")
    rows = list(csv.reader(io.StringIO(client.get(reverse("classes:password_links_csv",
                                                          args=[cohort.pk])).content.decode())))
    assert rows[0] == ["username", "name", "email", "set_password_link"]
    assert [row[:3] for row in rows[1:]] == [["bo", "Bo Li", "bo@example.org"]]  # "student" has a password
    assert "/accounts/reset/" in rows[1][3]


def test_a_bad_csv_imports_nothing_and_names_every_problem_by_line(client, cohort, teacher, other_teacher):
    User.objects.create_user("taken", email="taken@example.org")
    logged_in(client, teacher)
    text = ("username,email,name\n"
            "good1,good1@example.org,Good One\n"  # line 2: fine
            "has space,x@example.org,\n"  # 3
            "good1,,\n"  # 4: duplicate of line 2
            "mail,not-an-email,\n"  # 5
            ",nobody@example.org,No Name\n"  # 6
            "thief,taken@example.org,\n"  # 7: email of another account
            "other-teacher,,\n"  # 8: an existing account: an invitation, whatever its role (not told)
            "taken,different@example.org,\n")  # 9: existing account: invited, its email never compared
    users_before = User.objects.count()
    response = import_csv(client, cohort, text)
    assert response.status_code == 400
    html = response.content.decode()
    problems = re.findall(r"<li>Line (\d+)", html.split('id="import-problems"')[1].split("</ul>")[0])
    assert problems == ["3", "4", "5", "6", "7"]
    assert "“has space” is not a valid username" in html
    assert "The username “good1” is also on line 2." in html
    assert "“not-an-email” is not a valid email address." in html
    assert "The username is empty." in html
    assert "“taken@example.org” cannot be used for a new account" in html
    assert "“taken”" not in html.split('id="import-problems"')[1].split("</ul>")[0]  # whose email it is stays private
    assert "Nothing was imported" in html
    assert User.objects.count() == users_before and cohort.enrollments.count() == 1  # nothing half-imported
    assert "good1,good1@example.org,Good One" in html  # the text sent comes back, to fix and resend


@pytest.mark.parametrize("data, message", [
    (b"", "Choose a CSV file or paste its text"),
    (b"email,name\nx@example.org,X\n", "must name the columns"),
    (b"username,email\n", "has a header but no students"),
    ("username\nzo\u00eb\n".encode("latin-1"), "not UTF-8"),
    (("username\n" + "".join(f"u{n}\n" for n in range(2001))).encode(), "More than 2000 students in one file"),
])
def test_a_csv_the_importer_cannot_read_is_refused_whole(client, cohort, teacher, data, message):
    logged_in(client, teacher)
    url = reverse("classes:roster_import", args=[cohort.pk])
    payload = {"roster-file": SimpleUploadedFile("c.csv", data, "text/csv")} if data else {"roster-text": ""}
    response = client.post(url, payload)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert cohort.enrollments.count() == 1


def test_an_instructor_adds_and_removes_one_student_without_admin(client, cohort, teacher, student):
    logged_in(client, teacher)
    response = client.post(reverse("classes:student_add", args=[cohort.pk]),
                           {"student-username": "cy", "student-email": "cy@example.org", "student-name": "Cy"})
    assert response.status_code == 200 and cohort.enrollments.filter(user__username="cy").exists()
    response = client.post(reverse("classes:student_remove", args=[cohort.pk, student.pk]))
    assert response.status_code == 302
    assert not cohort.enrollments.filter(user=student).exists()
    assert User.objects.filter(pk=student.pk).exists()  # the account stays
    assert client.get(reverse("classes:student", args=[cohort.pk, student.pk])).status_code == 404


# --- Invite code ------------------------------------------------------------------------------------------

def test_joining_by_invite_code_signing_up_first(client, cohort):
    join_url = reverse("classes:join", args=[cohort.invite_code])
    page = client.get(join_url).content.decode()
    signup = f'{reverse("courseapp:signup")}?next={join_url}'
    assert signup in page
    response = client.post(reverse("courseapp:signup"), {"username": "newbie", "password1": "a-Long-pass-42",
                                                        "password2": "a-Long-pass-42", "next": join_url})
    assert response.status_code == 302 and response["Location"] == join_url
    assert "Join “Spring A”" in client.get(join_url).content.decode()
    assert client.post(join_url).status_code == 302
    assert cohort.enrollments.filter(user__username="newbie", source=Enrollment.Source.INVITE).exists()
    assert client.post(join_url).status_code == 302  # joining twice is harmless
    assert cohort.enrollments.filter(user__username="newbie").count() == 1


def test_the_code_can_be_typed_in_any_case(client, cohort, student):
    logged_in(client, student)
    response = client.get(reverse("classes:join_by_code"), {"code": f" {cohort.invite_code.lower()} "})
    assert response.status_code == 302 and response["Location"] == cohort.join_path()


def test_a_wrong_code_a_closed_cohort_and_a_teacher_are_refused(client, cohort, teacher):
    outsider = User.objects.create_user("outsider", password="x-Long-pass-42")
    logged_in(client, outsider)
    response = client.get(reverse("classes:join", args=["NOPE2345"]))
    assert response.status_code == 404 and "No cohort has this invite code" in response.content.decode()
    old = cohort.join_path()
    logged_in(client, teacher)
    client.post(reverse("classes:invite_reset", args=[cohort.pk]), {"open": "0"})
    cohort.refresh_from_db()
    assert cohort.join_path() != old and not cohort.joining_open
    assert client.post(cohort.join_path()).status_code == 403  # a teacher never joins as a student
    logged_in(client, outsider)
    assert client.get(old).status_code == 404
    assert client.post(cohort.join_path()).status_code == 403
    assert not cohort.enrollments.filter(user=outsider).exists()


# --- Due dates and lateness -------------------------------------------------------------------------------

def test_lateness_states():
    due = timezone.now()
    hour = timedelta(hours=1)
    assert deadlines.status(due, due - hour).state == deadlines.DONE
    assert deadlines.status(due, due).state == deadlines.DONE
    assert deadlines.status(due, due + hour).state == deadlines.DONE_LATE
    assert deadlines.status(due, None, now=due + hour).state == deadlines.LATE
    assert deadlines.status(due, None, now=due - hour).state == deadlines.DUE


def test_an_instructor_sets_a_due_date_and_the_student_sees_what_is_late(client, cohort, teacher, student):
    logged_in(client, teacher)
    past = timezone.localtime() - timedelta(days=1)
    response = client.post(reverse("classes:due_date_set", args=[cohort.pk]),
                           {"due-module": Module.objects.get(slug="intro").pk,
                            "due-due_at": past.strftime("%Y-%m-%dT%H:%M")})
    assert response.status_code == 302
    future = timezone.localtime() + timedelta(days=3)
    client.post(reverse("classes:due_date_set", args=[cohort.pk]),
                {"due-module": Module.objects.get(slug="cache").pk, "due-due_at": future.strftime("%Y-%m-%dT%H:%M")})
    assert cohort.due_dates.count() == 2
    bad = client.post(reverse("classes:due_date_set", args=[cohort.pk]), {"due-module": "", "due-due_at": "soon"})
    assert bad.status_code == 400

    logged_in(client, student)
    module_page = client.get(reverse("courseapp:module", args=["intro"])).content.decode()
    assert 'class="due-notice due-late"' in module_page and "Late: this module was due" in module_page
    index = client.get(reverse("courseapp:index")).content.decode()
    assert index.count('class="due-badge due-late"') == 2  # the course map and the module list
    assert 'class="due-badge due-due"' in index
    mine = client.get(reverse("classes:home")).content.decode()
    assert "Introduction to inference" in mine and "Late" in mine

    take_quiz(student, "intro", RIGHT, score=2)  # passing completes the module, after its due date
    module_page = client.get(reverse("courseapp:module", args=["intro"])).content.decode()
    assert 'class="due-notice due-done-late"' in module_page
    mark_complete(Learner(user=student, visitor=""), Module.objects.get(slug="cache"))
    assert 'class="due-notice due-done"' in client.get(reverse("courseapp:module", args=["cache"])).content.decode()


def test_setting_a_module_again_replaces_its_due_date(client, cohort, teacher):
    logged_in(client, teacher)
    intro = Module.objects.get(slug="intro").pk
    for day in ("2030-01-01T10:00", "2030-02-01T10:00"):
        client.post(reverse("classes:due_date_set", args=[cohort.pk]), {"due-module": intro, "due-due_at": day})
    assert [d.due_at.month for d in DueDate.objects.filter(cohort=cohort)] == [2]


def test_visitors_and_students_outside_the_cohort_see_no_due_date(client, cohort):
    DueDate.objects.create(cohort=cohort, module=Module.objects.get(slug="intro"),
                           due_at=timezone.now() - timedelta(days=1))
    assert "due-badge" not in client.get(reverse("courseapp:index")).content.decode()
    logged_in(client, User.objects.create_user("loner"))
    assert "due-notice" not in client.get(reverse("courseapp:module", args=["intro"])).content.decode()


# --- Announcements ----------------------------------------------------------------------------------------

def test_announcements_reach_the_cohort_students_only(client, cohort, other_cohort, teacher, student):
    logged_in(client, teacher)
    response = client.post(reverse("classes:announcement_create", args=[cohort.pk]),
                           {"announcement-title": "Quiz 1 due Friday", "announcement-body": "Read <b>intro</b>."})
    assert response.status_code == 302
    logged_in(client, student)
    index = client.get(reverse("courseapp:index")).content.decode()
    assert "Quiz 1 due Friday" in index and "Read &lt;b&gt;intro&lt;/b&gt;." in index
    logged_in(client, User.objects.create_user("elsewhere"))
    assert "Quiz 1 due Friday" not in client.get(reverse("courseapp:index")).content.decode()
    logged_in(client, teacher)
    client.post(reverse("classes:announcement_delete", args=[cohort.pk, Announcement.objects.get().pk]))
    assert not Announcement.objects.exists()


# --- Gradebook --------------------------------------------------------------------------------------------

def test_the_student_page_shows_progress_quiz_answers_and_demo_runs(client, cohort, teacher, student):
    take_quiz(student, "intro", WRONG, score=0)
    take_quiz(student, "intro", RIGHT, score=2)
    Run.objects.create(demo="kv-cache", status=Run.Status.DONE, owner=f"u:{student.pk}", user=student)
    logged_in(client, teacher)
    html = client.get(reverse("classes:student", args=[cohort.pk, student.pk])).content.decode()
    assert "Once, like training." in html and "For every request." in html
    assert "Decode is memory-bound at batch 1.; Prefill is parallel over the prompt." in html
    assert html.count("Wrong") >= 2 and "2/2 (passed)" in html and "0/2 (not passed)" in html
    assert "kv-cache" in html and "Open the run" in html


def test_the_gradebook_csv_has_a_row_per_student_and_columns_per_module(client, cohort, teacher, student):
    DueDate.objects.create(cohort=cohort, module=Module.objects.get(slug="intro"),
                           due_at=timezone.now() - timedelta(days=1))
    Enrollment.objects.create(cohort=cohort, user=User.objects.create_user("zed", first_name="Zed"),
                              source=Enrollment.Source.IMPORT)
    take_quiz(student, "intro", RIGHT, score=2)
    logged_in(client, teacher)
    rows = list(csv.reader(io.StringIO(client.get(reverse("classes:gradebook_csv", args=[cohort.pk]))
                                       .content.decode())))
    assert rows[0] == ["username", "name", "email", "left_lms_course", "modules_done", "modules_late",
                       "intro: status", "intro: best quiz score (of 2)",
                       "cache: status", "cache: best quiz score (of 0)"]
    assert rows[1] == ["student", "", "", "", "1", "1", "Done late", "2", "Not started", ""]
    assert rows[2] == ["zed", "Zed", "", "", "0", "1", "Late", "", "Not started", ""]
    page = client.get(reverse("classes:gradebook", args=[cohort.pk])).content.decode()
    assert '<caption id="gradebook-caption">Students × modules</caption>' in page


# --- Class figures ----------------------------------------------------------------------------------------

def test_class_figures_count_only_the_cohorts_enrolled_students(client, cohort, teacher, student):
    intro = Module.objects.get(slug="intro")
    outsider = User.objects.create_user("outsider")
    take_quiz(student, "intro", RIGHT, score=2)
    take_quiz(outsider, "intro", WRONG, score=0)
    take_quiz(teacher, "intro", WRONG, score=0)  # an instructor trying the quiz
    QuizAttempt.objects.create(module=intro, visitor="anon1", score=0, total=2, answers=WRONG)  # a curl
    ModuleProgress.objects.create(module=intro, visitor="anon1")
    demo = intro.demos[0]["name"] if intro.demos else "kv-cache"
    Module.objects.filter(pk=intro.pk).update(demos=[{"name": demo}])
    Run.objects.create(demo=demo, status=Run.Status.DONE, owner=f"u:{student.pk}", user=student)
    Run.objects.create(demo=demo, status=Run.Status.DONE, owner=f"u:{teacher.pk}", user=teacher)  # a preview
    Run.objects.create(demo=demo, status=Run.Status.DONE, owner="s:anon")
    # A student made instructor after enrolling leaves the figures too.
    promoted = User.objects.create_user("promoted", is_staff=True)
    Enrollment.objects.create(cohort=cohort, user=promoted, source=Enrollment.Source.IMPORT)
    take_quiz(promoted, "intro", WRONG, score=0)

    logged_in(client, teacher)
    rows = list(csv.reader(io.StringIO(client.get(reverse("classes:module_figures_csv", args=[cohort.pk, "intro"]))
                                       .content.decode())))
    values = {(r[0], r[1], r[2]): r[3] for r in rows[1:]}
    assert values["learners", "enrolled", "started"] == "1"
    assert values["learners", "enrolled", "quiz_attempts"] == "1"
    assert ("learners", "anonymous", "started") not in values
    assert values["quiz", "attempts", ""] == "1" and values["quiz", "passed", ""] == "1"
    assert values["demo", demo, "total"] == "1"
    page = client.get(reverse("classes:module_figures", args=[cohort.pk, "intro"])).content.decode()
    assert "Only this cohort's enrolled students are counted" in page
    assert '<th scope="row">Enrolled students</th>' in page and "Anonymous visitors" not in page
    gradebook = client.get(reverse("classes:gradebook", args=[cohort.pk])).content.decode()
    assert "promoted" not in gradebook and "outsider" not in gradebook


def test_a_semicolon_separated_export_is_read_too(client, cohort, teacher):
    logged_in(client, teacher)
    response = import_csv(client, cohort, "Username;Email;Name\ndee;dee@example.org;Dee Dee\n", as_file=True)
    assert response.status_code == 200 and response["Cache-Control"].startswith("max-age=0")
    assert User.objects.get(username="dee").get_full_name() == "Dee Dee"
