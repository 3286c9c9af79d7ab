"""The forms of the classes pages (each posted to its own view, with its own prefix so ids never clash)."""
from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.utils import timezone

from courseapp.models import Module

from .access import is_teacher, runs_classes
from .models import INVITE_LENGTH, Announcement, Cohort, DueDate
from .roster import MAX_BYTES, RosterFileError, decode


class CohortForm(forms.ModelForm):
    prefix = "cohort"

    class Meta:
        model = Cohort
        fields = ["name"]
        labels = {"name": "Cohort name"}
        help_texts = {"name": "E.g. “Spring 2027, section B”. Students see it."}


class RosterImportForm(forms.Form):
    """A CSV file, or the same text pasted (a file wins when both are given)."""

    prefix = "roster"
    file = forms.FileField(label="CSV file", required=False,
                           help_text="Columns: username (required), email, name; the first line names them.")
    text = forms.CharField(label="…or paste the CSV here", required=False, max_length=MAX_BYTES,
                           widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"}))

    def clean(self) -> dict:
        cleaned = super().clean()
        upload = cleaned.get("file")
        if upload is not None:
            try:
                cleaned["csv_text"] = decode(upload.read(MAX_BYTES + 1))
            except RosterFileError as error:
                raise forms.ValidationError(str(error)) from error
        elif (cleaned.get("text") or "").strip():
            cleaned["csv_text"] = cleaned["text"]
        elif not self.errors:
            raise forms.ValidationError("Choose a CSV file or paste its text: nothing was imported.")
        return cleaned


class AddStudentForm(forms.Form):
    """One student typed in: imported as a one-row CSV, so the same checks apply."""

    prefix = "student"
    username = forms.CharField(max_length=150)
    email = forms.EmailField(required=False)
    name = forms.CharField(required=False, max_length=300)


class DueDateForm(forms.ModelForm):
    prefix = "due"

    class Meta:
        model = DueDate
        fields = ["module", "due_at"]
        labels = {"due_at": "Due (date and time)"}
        widgets = {"due_at": forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["module"].queryset = Module.objects.published().in_course_order()
        self.fields["due_at"].input_formats = ["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"]
        self.fields["due_at"].help_text = f"In the cohort's time zone ({timezone.get_current_timezone_name()}). " \
                                          "Setting a module again replaces its due date."


class AnnouncementForm(forms.ModelForm):
    prefix = "announcement"

    class Meta:
        model = Announcement
        fields = ["title", "body"]
        widgets = {"body": forms.Textarea(attrs={"rows": 4})}


class InstructorForm(forms.Form):
    prefix = "instructor"
    username = forms.CharField(max_length=150, label="Instructor's username",
                               help_text="A course author's account, or one that already teaches a cohort.")

    def clean_username(self):
        user = get_user_model().objects.filter(username=self.cleaned_data["username"]).first()
        if user is None or not (is_teacher(user) or runs_classes(user)):
            raise forms.ValidationError("No instructor account has this username.")
        return user


class JoinForm(forms.Form):
    code = forms.CharField(max_length=INVITE_LENGTH + 6, label="Invite code",
                           widget=forms.TextInput(attrs={"autocomplete": "off", "autocapitalize": "characters"}))

    def clean_code(self) -> str:
        return self.cleaned_data["code"].strip().upper().replace(" ", "").replace("-", "")
