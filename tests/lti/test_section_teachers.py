"""Issue 42: a section teacher is not a course author. An LMS Instructor (or TeachingAssistant) launch makes the
person the teacher of that course's cohort, landing on its gradebook with no command run; the LMS's role decides
at every launch; and a teacher of cohort B meets none of cohort A's students on any class or admin URL."""
from __future__ import annotations

import re
from datetime import timedelta
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from lti_platform import INSTRUCTOR, LEARNER, launch

from classes.models import Announcement, Cohort, DueDate, DueDateExtension, Enrollment, Invitation
from courseapp.instructors import PERMISSION, make_instructor
from courseapp.models import Module
from courseapp.progress import Learner, mark_complete, record_attempt
from lti.models import Identity

TEACHING_ASSISTANT = "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"


def _claims(platform, sub: str, role: str, *, context_id: str = "course-101", **names) -> dict:
    claims = platform.resource_claims(sub, role, module="intro", context_id=context_id)
    claims[platform_context_key(claims)]["title"] = f"Course {context_id}"
    for key in ("given_name", "family_name", "email"):
        claims.pop(key)
    claims.update(names)
    return claims


def platform_context_key(claims: dict) -> str:
    return next(key for key in claims if key.endswith("/claim/context"))


def _gradebook_path(response, cohort: Cohort) -> str:
    location = urlsplit(response["Location"])
    assert location.path == reverse("classes:gradebook", args=[cohort.pk]), response["Location"]
    return response["Location"]


@pytest.mark.parametrize("role", [INSTRUCTOR, TEACHING_ASSISTANT])
def test_an_lms_teacher_lands_on_their_cohorts_gradebook_with_no_command_run(client, course, platform, role):
    response = launch(client, platform, _claims(platform, "teach-1", role, name="Grace Hopper"))
    cohort = Cohort.objects.get(lti_context__context_id="course-101")
    landing = _gradebook_path(response, cohort)
    assert parse_qs(urlsplit(landing).query) == {"opened": ["intro"]}
    page = client.get(landing)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Gradebook: Course course-101" in html and 'href="/modules/intro/"' in html
    teacher = Identity.objects.get(subject="teach-1").user
    assert list(cohort.instructors.all()) == [teacher]
    # A section teacher, not a course author: no staff flag, no authoring permission, no authoring pages.
    assert not teacher.is_staff and not teacher.has_perm(PERMISSION) and not teacher.groups.exists()
    assert client.get(reverse("authoring:list")).status_code == 403
    assert client.get(reverse("classes:module_dashboard", args=["intro"])).status_code == 403
    assert client.post(reverse("classes:cohort_create"), {"name": "Mine"}).status_code == 403
    # Their cohort's own pages open.
    for name in ("cohort", "gradebook", "gradebook_csv"):
        assert client.get(reverse(f"classes:{name}", args=[cohort.pk])).status_code == 200, name
    assert client.get(reverse("classes:module_figures", args=[cohort.pk, "intro"])).status_code == 200
    assert "Course course-101" in client.get(reverse("classes:home")).content.decode()


def test_the_lms_role_decides_at_every_launch(client, course, platform):
    launch(client, platform, _claims(platform, "pat", LEARNER))
    cohort = Cohort.objects.get()
    pat = Identity.objects.get(subject="pat").user
    assert cohort.enrollments.filter(user=pat).exists() and not cohort.instructors.filter(pk=pat.pk).exists()
    assert client.get(reverse("classes:gradebook", args=[cohort.pk])).status_code == 403

    client.logout()  # made a TA in the LMS: teacher here, no longer a student of the cohort
    _gradebook_path(launch(client, platform, _claims(platform, "pat", TEACHING_ASSISTANT)), cohort)
    assert cohort.instructors.filter(pk=pat.pk).exists() and not cohort.enrollments.filter(user=pat).exists()
    assert client.get(reverse("classes:gradebook", args=[cohort.pk])).status_code == 200

    client.logout()  # the role removed in the LMS: removed here, a student again
    response = launch(client, platform, _claims(platform, "pat", LEARNER))
    assert response["Location"] == "/modules/intro/"
    assert not cohort.instructors.filter(pk=pat.pk).exists() and cohort.enrollments.filter(user=pat).exists()
    assert client.get(reverse("classes:gradebook", args=[cohort.pk])).status_code == 403
    assert client.get(reverse("classes:home")).status_code == 200  # a student's classes page


def test_names_follow_the_lms_and_the_gradebook_sorts_by_them(client, course, platform):
    launch(client, platform, _claims(platform, "s-1", LEARNER, name="Ada Lovelace"))  # only `name`
    ada = Identity.objects.get(subject="s-1").user
    assert (ada.first_name, ada.last_name) == ("Ada", "Lovelace")
    launch(client, platform, _claims(platform, "s-2", LEARNER, given_name="Zoë", family_name="Abbott",
                                     name="Zoë Abbott", email="zoe@school.example"))
    launch(client, platform, _claims(platform, "s-3", LEARNER))  # no name at all: the username stands in
    launch(client, platform, _claims(platform, "s-4", LEARNER, name="Plato"))
    assert Identity.objects.get(subject="s-4").user.get_full_name() == "Plato"

    # Changed in the LMS: changed here at the next launch (an email another account holds is not taken).
    User.objects.create_user("someone", email="taken@school.example")
    launch(client, platform, _claims(platform, "s-2", LEARNER, given_name="Zoe", family_name="Abbott-Byrne",
                                     email="zoe.ab@school.example"))
    launch(client, platform, _claims(platform, "s-1", LEARNER, name="Ada King", email="taken@school.example"))
    zoe, ada = Identity.objects.get(subject="s-2").user, Identity.objects.get(subject="s-1").user
    assert (zoe.first_name, zoe.last_name, zoe.email) == ("Zoe", "Abbott-Byrne", "zoe.ab@school.example")
    assert (ada.first_name, ada.last_name, ada.email) == ("Ada", "King", "")
    launch(client, platform, _claims(platform, "s-1", LEARNER))  # a launch with no name keeps the one known
    assert User.objects.get(pk=ada.pk).get_full_name() == "Ada King"

    client.logout()
    cohort = Cohort.objects.get()
    page = client.get(launch(client, platform, _claims(platform, "t-1", INSTRUCTOR))["Location"]).content.decode()
    nameless = Identity.objects.get(subject="s-3").user.username
    shown = re.findall(r'<th scope="row"><a href="[^"]+">([^<]+)</a>', page)
    assert shown == ["Ada King", nameless, "Plato", "Zoe Abbott-Byrne"]  # by name, the username standing in
    csv = client.get(reverse("classes:gradebook_csv", args=[cohort.pk])).content.decode().splitlines()
    assert [line.split(",")[1] for line in csv[1:]] == ["Ada King", "", "Plato", "Zoe Abbott-Byrne"]


# --- A teacher of cohort B, walking every class and admin URL with cohort A's ids ---------------------------------

SECRET_NAME, SECRET_EMAIL = "Zelda", "zelda.quartz@school.example"


@pytest.fixture
def two_sections(client, course, platform):
    """Cohort A (its teacher, a student with a quiz attempt, progress, a due date, an announcement, an invitation)
    and cohort B, both made by LMS launches; returns what the walk needs."""
    launch(client, platform, _claims(platform, "teach-a", INSTRUCTOR))
    launch(client, platform, _claims(platform, "stu-a", LEARNER, given_name=SECRET_NAME, family_name="Quartz",
                                     email=SECRET_EMAIL))
    cohort_a = Cohort.objects.get(lti_context__context_id="course-101")
    student_a = Identity.objects.get(subject="stu-a").user
    intro = Module.objects.get(slug="intro")
    record_attempt(Learner(user=student_a, visitor=""), intro,
                   SimpleNamespace(score=1, total=intro.questions.count(), answers={}, passed=False))
    mark_complete(Learner(user=student_a, visitor=""), intro)
    due = DueDate.objects.create(cohort=cohort_a, module=intro, due_at=timezone.now() + timezone.timedelta(days=3))
    extension = DueDateExtension.objects.create(due_date=due, user=student_a, due_at=due.due_at + timedelta(days=2))
    announcement = Announcement.objects.create(cohort=cohort_a, title="For A", body="Only A")
    outsider = User.objects.create_user("outsider-a")
    invitation = Invitation.objects.create(cohort=cohort_a, user=outsider, username_typed="outsider-a")
    client.logout()
    launch(client, platform, _claims(platform, "stu-b", LEARNER, context_id="course-B", name="Bob Bee"))
    client.logout()
    teacher_b_landing = launch(client, platform, _claims(platform, "teach-b", INSTRUCTOR, context_id="course-B"))
    cohort_b = Cohort.objects.get(lti_context__context_id="course-B")
    _gradebook_path(teacher_b_landing, cohort_b)
    return SimpleNamespace(cohort=cohort_a, student=student_a, due=due, extension=extension, announcement=announcement,
                           invitation=invitation, cohort_b=cohort_b,
                           teacher_b=Identity.objects.get(subject="teach-b").user)


def _named_patterns(resolver: URLResolver, namespace: str):
    """(name, parameter names) of every named URL under `namespace` (nested resolvers included)."""
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}:{entry.namespace}" if entry.namespace and namespace else entry.namespace
            yield from _named_patterns(entry, inner or namespace)
        elif isinstance(entry, URLPattern) and entry.name:
            regex = entry.pattern.regex
            positional = [f"arg{i}" for i in range(regex.groups)] if not regex.groupindex else []
            yield f"{namespace}:{entry.name}", list(regex.groupindex) or positional


def _patterns(namespace: str):
    found = [(name, params) for name, params in _named_patterns(get_resolver(), "")
             if name.startswith(f"{namespace}:")]
    assert found, namespace
    return found


def _state(sections) -> tuple:
    cohort = Cohort.objects.get(pk=sections.cohort.pk)
    return (cohort.name, cohort.invite_code, cohort.joining_open, cohort.archived, cohort.time_zone,
            sorted(DueDateExtension.objects.filter(due_date__cohort=cohort).values_list("pk", "due_at")),
            sorted(cohort.instructors.values_list("pk", flat=True)),
            sorted(cohort.enrollments.values_list("user_id", flat=True)),
            sorted(cohort.due_dates.values_list("pk", "due_at")), cohort.announcements.count(),
            cohort.invitations.count(), Cohort.objects.count() - 2)


def _leaks(response, sections) -> bool:
    body = b"".join(response) if response.streaming else response.content
    text = body.decode(errors="replace")
    return any(secret in text for secret in (SECRET_NAME, SECRET_EMAIL, sections.student.username))


def _walk_classes(client, sections) -> int:
    values = {"cohort_id": sections.cohort.pk, "user_id": sections.student.pk, "slug": "intro",
              "invitation_id": sections.invitation.pk, "due_id": sections.due.pk,
              "announcement_id": sections.announcement.pk, "code": sections.cohort.invite_code,
              "extension_id": sections.extension.pk}
    before, walked = _state(sections), 0
    for name, params in _patterns("classes"):
        url = reverse(name, kwargs={param: values[param] for param in params})  # a new parameter: name its value
        for method in (client.get, client.post):
            response = method(url)
            assert not _leaks(response, sections), (name, method.__name__)
            if set(params) & {"cohort_id", "user_id", "invitation_id", "due_id", "announcement_id", "extension_id"}:
                assert response.status_code in (403, 404, 405), (name, method.__name__, response.status_code)
            walked += 1
        assert _state(sections) == before, name
    return walked


def test_a_teacher_of_cohort_b_meets_none_of_cohort_as_students(client, two_sections):
    sections = two_sections
    client.force_login(sections.teacher_b)
    assert _walk_classes(client, sections) >= 40
    gradebook = client.get(reverse("classes:gradebook", args=[sections.cohort_b.pk])).content.decode()
    assert "Bob Bee" in gradebook  # their own student, for contrast
    # Not staff: every admin URL sends them to the admin's login, with nothing of A's.
    _walk_admin(client, sections, staff=False)


def test_a_course_author_teaching_cohort_b_meets_none_of_cohort_as_students(client, two_sections):
    sections = two_sections
    author = sections.teacher_b
    Group.objects.get_or_create(name="instructor")
    make_instructor(author)  # `createinstructor`: staff, the instructor group; still named on cohort B only
    client.force_login(author)
    assert _walk_classes(client, sections) >= 40
    assert _walk_admin(client, sections, staff=True) >= 10


def _admin_values(sections) -> dict[str, list]:
    """Per admin URL name prefix (app_model), the ids of rows that are, or point at, cohort A or its student."""
    targets = {User: sections.student, Cohort: sections.cohort}
    ids: dict[str, list] = {}
    for model in admin.site._registry:
        related = [f for f in model._meta.get_fields()
                   if f.is_relation and not f.auto_created and f.related_model in targets]
        rows = model.objects.none()
        for field in related:
            rows = rows | model.objects.filter(**{field.name: targets[field.related_model]})
        if model in targets:
            rows = rows | model.objects.filter(pk=targets[model].pk)
        ids[f"{model._meta.app_label}_{model._meta.model_name}"] = list(rows.values_list("pk", flat=True).distinct())
    return ids


def _walk_admin(client, sections, *, staff: bool) -> int:
    ids = _admin_values(sections)
    assert ids["courseapp_quizattempt"] and ids["courseapp_moduleprogress"] and ids["auth_user"]
    walked = 0
    for name, params in _patterns("admin"):
        if name in ("admin:logout", "admin:login"):
            continue
        url_name = name.split(":", 1)[1]
        prefix = max((key for key in ids if url_name.startswith(key + "_")), key=len, default="")
        if params == ["object_id"] or params == ["id"]:
            kwargs_list = [{params[0]: pk} for pk in ids.get(prefix, [])]
        elif params == ["app_label"]:
            kwargs_list = [{"app_label": label} for label in {m._meta.app_label for m in admin.site._registry}]
        elif params == ["content_type_id", "object_id"]:
            from django.contrib.contenttypes.models import ContentType

            kwargs_list = [{"content_type_id": ContentType.objects.get_for_model(Cohort).pk,
                            "object_id": sections.cohort.pk}]
        elif params and params[0] == "arg0" and not ids.get(prefix):
            kwargs_list = []  # e.g. a module's revision: nothing of cohort A's is a row of that model
        elif params in ([], ["url"]):
            kwargs_list = [{}] if not params else []
        else:
            raise AssertionError(f"{name}: name the values of {params} for this walk")
        for kwargs in kwargs_list:
            response = client.get(reverse(name, kwargs=kwargs))
            assert not _leaks(response, sections), (name, kwargs)
            if not staff:
                assert response.status_code == 302 and "/admin/login/" in response["Location"], name
            elif kwargs.keys() & {"object_id", "id"}:
                assert response.status_code in (302, 403, 404), (name, kwargs, response.status_code)
            walked += 1
    return walked


def test_the_gradebook_says_when_a_module_not_done_yet_is_due(client, course, platform):
    launch(client, platform, _claims(platform, "s-due", LEARNER, name="Dee Due"))
    client.logout()
    landing = launch(client, platform, _claims(platform, "t-due", INSTRUCTOR))["Location"]
    cohort = Cohort.objects.get()
    due_at = timezone.now() + timezone.timedelta(days=5)
    DueDate.objects.create(cohort=cohort, module=Module.objects.get(slug="intro"), due_at=due_at)
    expected = f"Due {timezone.localtime(due_at):%-d %b %Y, %H:%M}"
    assert expected in client.get(landing).content.decode()
    csv = client.get(reverse("classes:gradebook_csv", args=[cohort.pk])).content.decode()
    assert expected in csv and "Not done yet" not in csv


def test_a_section_teacher_names_another_as_co_teacher_but_not_a_student(client, two_sections):
    sections = two_sections
    teacher_a = Identity.objects.get(subject="teach-a").user
    client.force_login(teacher_a)
    add = reverse("classes:instructor_add", args=[sections.cohort.pk])
    refused = client.post(add, {"instructor-username": sections.student.username})
    assert refused.status_code == 400 and "No instructor account has this username" in refused.content.decode()
    assert client.post(add, {"instructor-username": sections.teacher_b.username}).status_code == 302
    client.force_login(sections.teacher_b)
    assert SECRET_NAME in client.get(reverse("classes:gradebook", args=[sections.cohort.pk])).content.decode()
