"""A section teacher's own tools, no superuser needed: rename, archive and set the time zone of a cohort; correct a
student's name and e-mail; a set-password link for a student who forgot theirs; one student's due-date extension.

Each view is a POST through `access.taught_cohort` (404 for a cohort that does not name the teacher) on a student
enrolled in that cohort (404 otherwise). What a teacher may do to an *account* is narrower than to an enrollment,
because an account may be in other cohorts and is its owner's way in: its e-mail (where password-reset mails go)
and a set-password link only for an account this cohort's import made, and never one with an LTI identity (its
owner signs in through their LMS). The link is Django's reset link: it works once (it stops matching once the
password changes or its owner signs in) and expires after PASSWORD_RESET_TIMEOUT.
"""
from __future__ import annotations

from zoneinfo import ZoneInfo, available_timezones

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from . import gradebook as grades
from .access import taught_cohort, teacher_required
from .models import Cohort, DueDate, DueDateExtension
from .roster import class_students

DATETIME_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"]


def zone_of(cohort: Cohort):
    """The time zone the cohort's due dates are set and shown in: its own, else the site's."""
    return ZoneInfo(cohort.time_zone) if cohort.time_zone else timezone.get_default_timezone()


class CohortSettingsForm(forms.ModelForm):
    prefix = "settings"

    class Meta:
        model = Cohort
        fields = ["name", "time_zone", "archived"]
        labels = {"name": "Cohort name", "time_zone": "Time zone", "archived": "Archived (the term is over)"}
        help_texts = {"archived": "Listed apart from your other cohorts and closed to joining; its students, their "
                                  "work and grades stay."}

    def clean_time_zone(self) -> str:
        name = self.cleaned_data["time_zone"].strip()
        if name and name not in available_timezones():
            raise forms.ValidationError(f"“{name}” is not a time zone name: use one like Europe/Paris or "
                                        "America/New_York (blank: the site's).")
        return name


class StudentDetailsForm(forms.Form):
    prefix = "details"
    first_name = forms.CharField(max_length=150, required=False, label="Given name")
    last_name = forms.CharField(max_length=150, required=False, label="Family name")
    email = forms.EmailField(required=False, label="E-mail")


class ExtensionForm(forms.Form):
    prefix = "extension"
    due_date = forms.ModelChoiceField(queryset=DueDate.objects.none(), label="Module")
    due_at = forms.DateTimeField(label="Their own due date", input_formats=DATETIME_FORMATS,
                                 widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))

    def __init__(self, *args, cohort: Cohort, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["due_date"].queryset = cohort.due_dates.select_related("module")
        self.fields["due_date"].label_from_instance = lambda due: due.module.title
        self.fields["due_at"].help_text = f"In the cohort's time zone ({zone_of(cohort)})."


def account_is_the_cohorts(user, cohort: Cohort) -> bool:
    """Whether this cohort's teachers administer the account itself (its e-mail, a new password): one this
    cohort's import made, with no LTI identity."""
    provisioned = getattr(user, "provisioned", None)
    return provisioned is not None and provisioned.cohort_id == cohort.pk and not user.lti_identities.exists()


def _student(cohort: Cohort, user_id: int):
    return get_object_or_404(class_students(cohort).select_related("provisioned"), pk=user_id)


def student_tools_context(cohort: Cohort, user, **forms_) -> dict:
    """What the student page's "Teacher's tools" section shows (classes/views.py's student page)."""
    extensions = list(DueDateExtension.objects.filter(due_date__cohort=cohort, user=user)
                      .select_related("due_date__module"))
    context = {"details_form": StudentDetailsForm(initial={"first_name": user.first_name,
                                                           "last_name": user.last_name, "email": user.email}),
               "extension_form": ExtensionForm(cohort=cohort), "extensions": extensions,
               "account_is_the_cohorts": account_is_the_cohorts(user, cohort), "zone": zone_of(cohort)}
    context.update(forms_)
    return context


def _student_page(request, cohort: Cohort, user, status: int, **forms_):
    context = {"cohort": cohort, "record": grades.student_record(cohort, user),
               **student_tools_context(cohort, user, **forms_)}
    with timezone.override(zone_of(cohort)):
        return render(request, "classes/student.html", context, status=status)


@teacher_required
@require_POST
def cohort_settings(request, cohort_id: int):
    cohort = taught_cohort(request, cohort_id)
    was_archived = cohort.archived
    form = CohortSettingsForm(request.POST, instance=cohort)
    if not form.is_valid():
        messages.error(request, " ".join(str(error) for errors in form.errors.values() for error in errors))
        return redirect(cohort)
    cohort = form.save(commit=False)
    if cohort.archived:
        cohort.joining_open = False  # unarchiving does not reopen it: "Open joining" on the page does
    cohort.save()
    state = " and archived" if cohort.archived and not was_archived else (
        " and back from the archive" if was_archived and not cohort.archived else "")
    messages.success(request, f"“{cohort.name}” saved{state}; due dates are in {zone_of(cohort)}.")
    return redirect(cohort)


@teacher_required
@require_POST
def student_details(request, cohort_id: int, user_id: int):
    cohort = taught_cohort(request, cohort_id)
    user = _student(cohort, user_id)
    form = StudentDetailsForm(request.POST)
    if form.is_valid():
        email = form.cleaned_data["email"]
        if email.lower() != user.email.lower():
            if not account_is_the_cohorts(user, cohort):
                form.add_error("email", "Only the student changes this account's e-mail (it is where their "
                                        "password-reset mail goes): it was not made by this cohort's import, or "
                                        "it signs in through an LMS.")
            elif email and get_user_model().objects.filter(email__iexact=email).exclude(pk=user.pk).exists():
                form.add_error("email", "Another account has this e-mail.")
    if not form.is_valid():
        return _student_page(request, cohort, user, 400, details_form=form)
    for field in ("first_name", "last_name", "email"):
        setattr(user, field, form.cleaned_data[field].strip())
    user.save(update_fields=["first_name", "last_name", "email"])
    note = " (an LMS launch brings the LMS's name back)" if user.lti_identities.exists() else ""
    messages.success(request, f"Saved {user.get_full_name() or user.username}'s details{note}.")
    return redirect("classes:student", cohort.pk, user.pk)


@teacher_required
@require_POST
@never_cache
def password_link(request, cohort_id: int, user_id: int):
    """A fresh set-password link, shown once on a page of its own (no e-mail needed)."""
    cohort = taught_cohort(request, cohort_id)
    user = _student(cohort, user_id)
    if not account_is_the_cohorts(user, cohort):
        messages.error(request, "No set-password link for this account: it was not made by this cohort's import, "
                                "or it signs in through an LMS. Its owner resets their password from the sign-in "
                                "page (“Forgot your password?”).")
        return redirect("classes:student", cohort.pk, user.pk)
    path = reverse("password_reset_confirm", kwargs={"uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
                                                     "token": default_token_generator.make_token(user)})
    return render(request, "classes/password_link.html",
                  {"cohort": cohort, "student": user, "link": request.build_absolute_uri(path)})


@teacher_required
@require_POST
def extension_set(request, cohort_id: int, user_id: int):
    cohort = taught_cohort(request, cohort_id)
    user = _student(cohort, user_id)
    with timezone.override(zone_of(cohort)):  # the date typed is the cohort's wall-clock time
        form = ExtensionForm(request.POST, cohort=cohort)
        valid = form.is_valid()
    if not valid:
        return _student_page(request, cohort, user, 400, extension_form=form)
    due = form.cleaned_data["due_date"]
    DueDateExtension.objects.update_or_create(due_date=due, user=user,
                                              defaults={"due_at": form.cleaned_data["due_at"]})
    when = timezone.localtime(form.cleaned_data["due_at"], zone_of(cohort))
    messages.success(request, f"{user.get_full_name() or user.username} has until {when:%Y-%m-%d %H:%M} "
                              f"({zone_of(cohort)}) for “{due.module.title}”.")
    return redirect("classes:student", cohort.pk, user.pk)


@teacher_required
@require_POST
def extension_remove(request, cohort_id: int, user_id: int, extension_id: int):
    cohort = taught_cohort(request, cohort_id)
    user = _student(cohort, user_id)
    get_object_or_404(DueDateExtension, pk=extension_id, user=user, due_date__cohort=cohort).delete()
    messages.success(request, "Extension removed: the cohort's due date applies again.")
    return redirect("classes:student", cohort.pk, user.pk)
