"""Classes pages: a cohort's instructors manage it (roster, due dates, announcements, gradebook, figures);
students join by invite code and read their cohorts' due dates and announcements.

Every cohort page goes through `access.taught_cohort` (403 for someone who neither authors nor teaches, 404
for a cohort that does not name them: access.py has the two roles); every change is a POST that redirects back
with a message, except a CSV import, whose result (or its problems, with the text sent kept in the form) is a
page of its own.
"""
from __future__ import annotations

import csv

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from courseapp.instructors import instructor_required
from courseapp.models import Module

from . import gradebook as grades
from . import roster
from .teacher_tools import CohortSettingsForm, student_tools_context, zone_of
from .access import is_teacher, runs_classes, taught_cohort, teacher_required
from .dashboard import spreadsheet_safe
from .deadlines import student_statuses
from .forms import (AddStudentForm, AnnouncementForm, CohortForm, DueDateForm, InstructorForm, JoinForm,
                    RosterImportForm)
from .models import Announcement, Cohort, DueDate, new_invite_code


def _csv_response(rows: list[list[object]], filename: str) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    csv.writer(response).writerows([spreadsheet_safe(cell) for cell in row] for row in rows)
    return response


# --- Home: an instructor's cohorts, a student's classes -------------------------------------------------

@login_required
@require_GET
def home(request):
    if is_teacher(request.user) or runs_classes(request.user):
        cohorts = (Cohort.objects.taught_by(request.user).prefetch_related("instructors")
                   .order_by("archived", "name", "pk"))  # archived cohorts last
        return render(request, "classes/home_instructor.html", {"cohorts": cohorts, "form": CohortForm()})
    return render(request, "classes/home_student.html", _student_context(request.user))


def _student_context(user) -> dict:
    cohorts = list(Cohort.objects.filter(enrollments__user=user))
    statuses = student_statuses(user)
    modules = {m.pk: m for m in Module.objects.published().in_course_order().filter(pk__in=statuses)}
    due = sorted(((modules[pk], state) for pk, state in statuses.items() if pk in modules),
                 key=lambda item: item[1].due_at)
    announcements = Announcement.objects.filter(cohort__in=cohorts).select_related("cohort")[:20]
    return {"cohorts": cohorts, "due": due, "announcements": announcements, "join_form": JoinForm(),
            "invitations": roster.pending_invitations(user)}


@instructor_required  # course authors make cohorts; a section teacher teaches those they are named on
@require_POST
def cohort_create(request):
    form = CohortForm(request.POST)
    if not form.is_valid():
        cohorts = Cohort.objects.taught_by(request.user)
        return render(request, "classes/home_instructor.html", {"cohorts": cohorts, "form": form}, status=400)
    with transaction.atomic():
        cohort = form.save()
        cohort.instructors.add(request.user)
    messages.success(request, f"Cohort “{cohort.name}” created. Share its invite link, or import students below.")
    return redirect(cohort)


# --- One cohort ------------------------------------------------------------------------------------------

def _cohort_context(request, cohort: Cohort, **forms) -> dict:
    students = list(roster.class_students(cohort))
    context = {
        "cohort": cohort,
        "students": students,
        "left_lms": set(cohort.enrollments.filter(active=False).values_list("user_id", flat=True)),
        "needs_password": len(roster.awaiting_password(cohort)),
        "invitations": cohort.invitations.all(),
        "instructors": cohort.instructors.order_by("username"),
        "join_url": request.build_absolute_uri(cohort.join_path()),
        "due_dates": cohort.due_dates.select_related("module"),
        "announcements": cohort.announcements.all()[:20],
        "modules": grades.course_modules(),
        "import_form": RosterImportForm(),
        "student_form": AddStudentForm(),
        "due_form": DueDateForm(),
        "announcement_form": AnnouncementForm(),
        "instructor_form": InstructorForm(),
        "settings_form": CohortSettingsForm(instance=cohort),
    }
    context.update(forms)
    return context


@teacher_required
@require_GET
def cohort_detail(request, cohort_id: int):
    cohort = taught_cohort(request, cohort_id)
    with timezone.override(zone_of(cohort)):  # its due dates read in the cohort's time zone
        return render(request, "classes/cohort.html", _cohort_context(request, cohort))


def _invalid(request, cohort: Cohort, **forms) -> HttpResponse:
    with timezone.override(zone_of(cohort)):
        return render(request, "classes/cohort.html", _cohort_context(request, cohort, **forms), status=400)


def _import_result(request, cohort: Cohort, report: roster.ImportReport, form) -> HttpResponse:
    links = [(user, roster.set_password_link(request, user, cohort)) for user in report.created_users]
    context = {"cohort": cohort, "report": report, "links": links, "labels": roster.OUTCOME_LABELS,
               "import_form": form}
    return render(request, "classes/import_result.html", context, status=200 if report.ok else 400)


@teacher_required
@require_POST
@never_cache
def roster_import(request, cohort_id: int):
    cohort = taught_cohort(request, cohort_id)
    form = RosterImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return _invalid(request, cohort, import_form=form)
    text = form.cleaned_data["csv_text"]
    try:
        report = roster.import_text(cohort, text, by=request.user)
    except roster.RosterFileError as error:
        form.add_error(None, f"{error} Nothing was imported.")
        return _invalid(request, cohort, import_form=form)
    # The text goes back in the form, so a rejected import loses nothing the instructor sent.
    return _import_result(request, cohort, report, RosterImportForm(initial={"text": text}))


@teacher_required
@require_POST
@never_cache
def student_add(request, cohort_id: int):
    cohort = taught_cohort(request, cohort_id)
    form = AddStudentForm(request.POST)
    if not form.is_valid():
        return _invalid(request, cohort, student_form=form)
    row = roster.RosterRow(line=1, **{name: form.cleaned_data[name] for name in ("username", "email", "name")})
    return _import_result(request, cohort, roster.import_rows(cohort, [row], by=request.user),
                          RosterImportForm(initial={"text": row.as_csv()}))


@teacher_required
@require_POST
def student_remove(request, cohort_id: int, user_id: int):
    cohort = taught_cohort(request, cohort_id)
    user = get_object_or_404(get_user_model(), pk=user_id)
    if roster.remove(cohort, user_id):
        messages.success(request, f"{user.username} is no longer in “{cohort.name}” (the account and its "
                                  "progress are kept).")
    return redirect(cohort)


@teacher_required
@require_GET
@never_cache
def password_links_csv(request, cohort_id: int):
    """Fresh set-password links for the accounts this cohort's import made whose owner has not signed in yet
    (never for an account that existed before, nor one with an LTI identity)."""
    cohort = taught_cohort(request, cohort_id)
    rows = [["username", "name", "email", "set_password_link"]]
    rows += [[user.username, user.get_full_name(), user.email, roster.set_password_link(request, user, cohort)]
             for user in roster.awaiting_password(cohort)]
    return _csv_response(rows, f"set-password-links-cohort-{cohort.pk}.csv")


@teacher_required
@require_POST
def invitation_withdraw(request, cohort_id: int, invitation_id: int):
    cohort = taught_cohort(request, cohort_id)
    invitation = get_object_or_404(cohort.invitations, pk=invitation_id)
    invitation.delete()
    messages.success(request, f"The invitation to {invitation.username_typed} is withdrawn.")
    return redirect(cohort)


@teacher_required
@require_POST
def invite_reset(request, cohort_id: int):
    cohort = taught_cohort(request, cohort_id)
    cohort.invite_code = new_invite_code()
    cohort.joining_open = request.POST.get("open", "1") == "1"
    cohort.save(update_fields=["invite_code", "joining_open"])
    messages.success(request, "New invite code made: the old link no longer works." if cohort.joining_open
                     else "Joining by invite code is closed (the old link no longer works).")
    return redirect(cohort)


@teacher_required
@require_POST
def instructor_add(request, cohort_id: int):
    cohort = taught_cohort(request, cohort_id)
    form = InstructorForm(request.POST)
    if not form.is_valid():
        return _invalid(request, cohort, instructor_form=form)
    cohort.instructors.add(form.cleaned_data["username"])
    messages.success(request, f"{form.cleaned_data['username'].username} now teaches “{cohort.name}”.")
    return redirect(cohort)


@teacher_required
@require_POST
def instructor_remove(request, cohort_id: int, user_id: int):
    """A cohort always keeps one instructor, so it never becomes unmanageable without the admin."""
    cohort = taught_cohort(request, cohort_id)
    teacher = get_object_or_404(cohort.instructors, pk=user_id)
    if cohort.instructors.count() == 1:
        messages.error(request, f"{teacher.username} is this cohort's only instructor: add another one first.")
    else:
        cohort.instructors.remove(teacher)
        messages.success(request, f"{teacher.username} no longer teaches “{cohort.name}”.")
    if teacher == request.user and cohort not in Cohort.objects.taught_by(request.user):
        return redirect("classes:home")
    return redirect(cohort)


@teacher_required
@require_POST
def due_date_set(request, cohort_id: int):
    cohort = taught_cohort(request, cohort_id)
    with timezone.override(zone_of(cohort)):  # the date typed is the cohort's wall-clock time
        form = DueDateForm(request.POST)  # the module and the date; one per (cohort, module), so set replaces
        valid = form.is_valid()
    if not valid:
        return _invalid(request, cohort, due_form=form)
    due, _ = DueDate.objects.update_or_create(cohort=cohort, module=form.cleaned_data["module"],
                                              defaults={"due_at": form.cleaned_data["due_at"]})
    messages.success(request, f"“{due.module.title}” is due "
                              f"{timezone.localtime(due.due_at, zone_of(cohort)):%Y-%m-%d %H:%M} ({zone_of(cohort)}).")
    return redirect(cohort)


@teacher_required
@require_POST
def due_date_remove(request, cohort_id: int, due_id: int):
    cohort = taught_cohort(request, cohort_id)
    cohort.due_dates.filter(pk=due_id).delete()
    messages.success(request, "Due date removed.")
    return redirect(cohort)


@teacher_required
@require_POST
def announcement_create(request, cohort_id: int):
    cohort = taught_cohort(request, cohort_id)
    form = AnnouncementForm(request.POST)
    if not form.is_valid():
        return _invalid(request, cohort, announcement_form=form)
    form.instance.cohort, form.instance.author = cohort, request.user
    form.save()
    messages.success(request, "Announcement posted: the cohort's students see it on the course page.")
    return redirect(cohort)


@teacher_required
@require_POST
def announcement_delete(request, cohort_id: int, announcement_id: int):
    cohort = taught_cohort(request, cohort_id)
    cohort.announcements.filter(pk=announcement_id).delete()
    messages.success(request, "Announcement deleted.")
    return redirect(cohort)


# --- Gradebook (class figures: dashboard.py) ------------------------------------------------------------

@teacher_required
@require_GET
def gradebook(request, cohort_id: int):
    cohort = taught_cohort(request, cohort_id)
    # An LMS teacher's launch lands here (lti/views.py) naming the module its link opens, offered as a link.
    opened = Module.objects.published().filter(slug=request.GET.get("opened", "")[:100]).first()
    with timezone.override(zone_of(cohort)):
        return render(request, "classes/gradebook.html",
                      {"cohort": cohort, "book": grades.gradebook(cohort), "opened": opened})


@teacher_required
@require_GET
def gradebook_csv(request, cohort_id: int):
    cohort = taught_cohort(request, cohort_id)
    with timezone.override(zone_of(cohort)):
        return _csv_response(grades.csv_rows(grades.gradebook(cohort)), f"gradebook-cohort-{cohort.pk}.csv")


@teacher_required
@require_GET
def student_detail(request, cohort_id: int, user_id: int):
    cohort = taught_cohort(request, cohort_id)
    user = get_object_or_404(roster.class_students(cohort), pk=user_id)
    with timezone.override(zone_of(cohort)):
        return render(request, "classes/student.html", {"cohort": cohort, "record": grades.student_record(
            cohort, user), **student_tools_context(cohort, user)})


# --- Joining ---------------------------------------------------------------------------------------------

@require_GET
def join_by_code(request):
    """The "I have a code" form: a valid code leads to that cohort's join page."""
    form = JoinForm(request.GET or None)
    if form.is_valid():
        return redirect("classes:join", code=form.cleaned_data["code"])
    return render(request, "classes/join_code.html", {"form": form}, status=400 if request.GET else 200)


@require_http_methods(["GET", "HEAD", "POST"])
def join(request, code: str):
    """GET: what joining means (and log in / sign up first when needed); POST: enroll."""
    cohort = Cohort.objects.filter(invite_code=code.upper()).first()
    if cohort is None:
        form = JoinForm(initial={"code": code})
        return render(request, "classes/join_code.html",
                      {"form": form, "unknown": "No cohort has this invite code: check it with your instructor."},
                      status=404)
    context = {"cohort": cohort, "teacher": request.user.is_authenticated and is_teacher(request.user)}
    if request.method == "POST" and request.user.is_authenticated:
        try:
            created = roster.join(cohort, request.user)
        except ValueError as error:
            context["error"] = str(error)
            return render(request, "classes/join.html", context, status=403)
        messages.success(request, f"You joined “{cohort.name}”." if created else f"You are in “{cohort.name}”.")
        return redirect("classes:home")
    if request.method == "POST":  # an anonymous visitor: log in first, then come back here
        return redirect(f"{reverse('login')}?next={cohort.join_path()}")
    context["enrolled"] = request.user.is_authenticated and cohort.enrollments.filter(user=request.user).exists()
    return render(request, "classes/join.html", context)


@login_required
@require_POST
def invitation_answer(request, invitation_id: int):
    """The invited account's owner accepts or declines, in their own session (anyone else: 404)."""
    invitation = get_object_or_404(roster.pending_invitations(request.user), pk=invitation_id)
    name = invitation.cohort.name
    try:
        joined = roster.answer_invitation(invitation, accept=request.POST.get("answer") == "accept")
    except ValueError as error:
        messages.error(request, str(error))
        return redirect("classes:home")
    messages.success(request, f"You joined “{name}”." if joined else f"You declined the invitation to “{name}”.")
    return redirect("classes:home")
