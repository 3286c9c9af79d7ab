"""Due dates and lateness. A module is *done* when the student's progress on it is complete
(`ModuleProgress.completed_at`: set when courseapp/completion.py's rule is first met: quiz passed, or a quiz-less
module marked complete, AND each lab submitted and exercise passed).

States, at a given moment `now`:
- DONE: completed no later than its due date; DONE_LATE: completed after it;
- LATE: not completed and the due date has passed; DUE: not completed, due date still ahead.
A student in several cohorts that set a due date for the same module is held to the earliest one; an extension
their teacher granted them (`DueDateExtension`) replaces that cohort's date for them.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from django.utils import timezone
from django.utils.formats import date_format

from courseapp.models import ModuleProgress

from .membership import cohort_ids
from .models import DueDate, DueDateExtension

DONE, DONE_LATE, LATE, DUE = "done", "done-late", "late", "due"
LABELS = {DONE: "Done", DONE_LATE: "Done late", LATE: "Late", DUE: "Due"}


@dataclass(frozen=True)
class DueStatus:
    due_at: datetime
    completed_at: datetime | None
    state: str
    zone: str = ""  # the time zone of the cohort that set the date (blank: the site's); the page adds the reader's

    @property
    def zone_name(self) -> str:
        return self.zone or timezone.get_current_timezone_name()

    @property
    def label(self) -> str:
        return LABELS[self.state]

    @property
    def late(self) -> bool:
        return self.state in (LATE, DONE_LATE)

    @property
    def due_text(self) -> str:
        """E.g. "due Tue 3 Mar 2026, 17:00 (UTC)", in the cohort's time zone (static/js/local-times.js adds the
        reader's own beside it)."""
        local = timezone.localtime(self.due_at, ZoneInfo(self.zone) if self.zone else None)
        return f"due {date_format(local, 'D j M Y, H:i')} ({self.zone_name})"

    @property
    def sentence(self) -> str:
        """What a student reads next to the module."""
        if self.state == DONE:
            return f"Done, {self.due_text}."
        if self.state == DONE_LATE:
            return f"Done late: it was {self.due_text}."
        if self.state == LATE:
            return f"Late: this module was {self.due_text}. It still counts when you complete it."
        return f"Complete this module (pass its quiz, or mark it complete): {self.due_text}."


def status(due_at: datetime, completed_at: datetime | None, now: datetime | None = None, zone: str = "") -> DueStatus:
    now = now or timezone.now()
    if completed_at is not None:
        state = DONE if completed_at <= due_at else DONE_LATE
    else:
        state = LATE if now > due_at else DUE
    return DueStatus(due_at=due_at, completed_at=completed_at, state=state, zone=zone)


def _earliest(user) -> dict[int, tuple[datetime, str]]:
    """module id → (the earliest due date any of the user's cohorts set for it, their extensions applied; that
    cohort's time zone). No query for a user in no cohort."""
    cohorts = cohort_ids(user)
    if not cohorts:
        return {}
    dates = list(DueDate.objects.filter(cohort_id__in=cohorts).values_list("pk", "module_id", "due_at",
                                                                          "cohort__time_zone"))
    extended = dict(DueDateExtension.objects.filter(user=user, due_date_id__in=[row[0] for row in dates])
                    .values_list("due_date_id", "due_at")) if dates else {}
    due: dict[int, tuple[datetime, str]] = {}
    for pk, module_id, due_at, zone in dates:
        due_at = extended.get(pk, due_at)
        if module_id not in due or due_at < due[module_id][0]:
            due[module_id] = (due_at, zone)
    return due


def student_due_dates(user) -> dict[int, datetime]:
    """module id → the earliest due date any of the user's cohorts set for it, their extensions applied."""
    return {module_id: due_at for module_id, (due_at, _) in _earliest(user).items()}


def student_statuses(user, now: datetime | None = None) -> dict[int, DueStatus]:
    """module id → the student's status on every module that is due for them (three queries)."""
    due = _earliest(user)
    if not due:
        return {}
    completed = dict(ModuleProgress.objects.filter(user=user, module_id__in=due)
                     .values_list("module_id", "completed_at"))
    return {module_id: status(due_at, completed.get(module_id), now, zone)
            for module_id, (due_at, zone) in due.items()}
