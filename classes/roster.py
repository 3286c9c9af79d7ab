"""A cohort's students: enrolling by invite code, by an instructor's CSV (or one row typed in), and removing.

A CSV import is all or nothing: every row is checked first, and when any row has a problem nothing is created
or enrolled, and each problem is reported with its line number (the instructor fixes the file and sends it
again; what they sent is shown back to them).

Credentials stay with their owner. A row naming no account creates one (`ProvisionedAccount`) with no password:
the instructor hands the student a *set-password link* (Django's password-reset link: it expires after
`PASSWORD_RESET_TIMEOUT` seconds and dies when the password is set), and links are issued only for such accounts,
only to their cohort's instructors, and only until the owner first signs in. A row naming an account that exists
is never enrolled by the import (unless the importer already teaches that student in another cohort): it becomes
an `Invitation` its owner accepts or declines in their own session, and the instructor learns nothing about the
account (no name, no email, no role) until then. No email is sent.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import QuerySet
from django.db.models.functions import Lower
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from .access import is_teacher, teachers
from .models import Cohort, Enrollment, Invitation, ProvisionedAccount

MAX_ROWS = 2000
MAX_BYTES = 500_000  # well under the 1 MiB request cap (REQUEST_MAX_BODY_BYTES), so this message is what one sees
# Header spellings a school's export may use, lower-cased, spaces and dashes removed.
COLUMN_ALIASES = {
    "username": "username", "user": "username", "login": "username",
    "email": "email", "emailaddress": "email", "mail": "email",
    "name": "name", "fullname": "name", "studentname": "name",
}
NAME_PART_LENGTH = 150  # first_name and last_name each hold this much


class RosterFileError(ValueError):
    """The file as a whole cannot be read (no header, not UTF-8, too big): nothing was imported."""


@dataclass(frozen=True)
class RosterRow:
    line: int  # in the file as the instructor sees it (the header is line 1)
    username: str
    email: str
    name: str


    def as_csv(self) -> str:
        """The row as a two-line CSV (header and row), as an import form shows it back."""
        buffer = io.StringIO()
        csv.writer(buffer).writerows([["username", "email", "name"], [self.username, self.email, self.name]])
        return buffer.getvalue()


@dataclass(frozen=True)
class RowProblem:
    line: int
    username: str
    message: str


@dataclass(frozen=True)
class RowOutcome:
    line: int
    username: str  # as the instructor typed it: an invited account's own spelling is not theirs to see
    outcome: str  # one of CREATED, ENROLLED, INVITED, ALREADY
    user: object = None  # the account, for the outcomes where the instructor may see it

    @property
    def outcome_label(self) -> str:
        return OUTCOME_LABELS[self.outcome]


CREATED, ENROLLED, INVITED, ALREADY = "created", "enrolled", "invited", "already"
OUTCOME_LABELS = {CREATED: "New account, enrolled",
                  ENROLLED: "Your student in another cohort, enrolled",
                  INVITED: "Invited: joins when the account's owner accepts",
                  ALREADY: "Already in this cohort (unchanged)"}


@dataclass
class ImportReport:
    rows: list[RowOutcome] = field(default_factory=list)
    problems: list[RowProblem] = field(default_factory=list)
    ignored_columns: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def count(self, outcome: str) -> int:
        return sum(row.outcome == outcome for row in self.rows)

    @property
    def created_users(self) -> list:
        return [row.user for row in self.rows if row.outcome == CREATED]

    @property
    def invited(self) -> int:
        return self.count(INVITED)


# --- Reading the CSV --------------------------------------------------------------------------------------

def decode(data: bytes) -> str:
    if len(data) > MAX_BYTES:
        raise RosterFileError(f"The file is larger than {MAX_BYTES // 1000} kB; split it into several imports.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise RosterFileError("The file is not UTF-8 text: in your spreadsheet, save it as “CSV UTF-8”.") from error


def _column_key(header: str) -> str:
    return COLUMN_ALIASES.get(header.strip().lower().replace(" ", "").replace("-", "").replace("_", ""), "")


def _delimiter(lines: list[str]) -> str:
    """A comma, unless the header line has none but semicolons or tabs (spreadsheets in some locales)."""
    header = next((line for line in lines if line.strip()), "")
    if "," not in header:
        for candidate in (";", "\t"):
            if candidate in header:
                return candidate
    return ","


def parse(text: str) -> tuple[list[RosterRow], list[str]]:
    """The rows (blank lines skipped) and the header cells that name no known column.

    The first non-blank line is the header; it must have a username column (email and name are optional)."""
    lines = text.splitlines()
    reader = csv.reader(io.StringIO("\n".join(lines)), delimiter=_delimiter(lines))
    header: list[str] | None = None
    rows: list[RosterRow] = []
    for cells in reader:
        if not any(cell.strip() for cell in cells):
            continue
        if header is None:
            header = [_column_key(cell) for cell in cells]
            ignored = [cell.strip() for cell, key in zip(cells, header) if not key]
            if "username" not in header:
                raise RosterFileError("The first line must name the columns, with at least “username” "
                                      "(and optionally “email” and “name”), e.g. username,email,name.")
            continue
        values = {key: cells[index].strip() for index, key in enumerate(header) if key and index < len(cells)}
        rows.append(RosterRow(line=reader.line_num,
                              username=values.get("username", ""), email=values.get("email", ""),
                              name=values.get("name", "")))
        if len(rows) > MAX_ROWS:
            raise RosterFileError(f"More than {MAX_ROWS} students in one file; split it into several imports.")
    if header is None:
        raise RosterFileError("The file is empty: put a header line (username,email,name) and one student a line.")
    if not rows:
        raise RosterFileError("The file has a header but no students.")
    return rows, ignored


# --- Checking and importing -------------------------------------------------------------------------------

def _split_name(name: str) -> tuple[str, str]:
    first, _, last = name.partition(" ")
    return first, last.strip()


def _row_problems(row: RosterRow, existing, by_email, seen: dict[str, int], seen_emails: dict[str, int]) -> list[str]:
    """What is wrong with one row. An existing account's email, name and role are never compared or reported:
    such a row becomes an invitation, and what the instructor typed beside it is not used."""
    User = get_user_model()
    problems = []
    if not row.username:
        return ["The username is empty."]
    try:
        User.username_validator(row.username)
        if len(row.username) > User._meta.get_field("username").max_length:
            raise ValidationError("too long")
    except ValidationError:
        problems.append(f"“{row.username}” is not a valid username: at most 150 letters, digits and @ . + - _ "
                        "(no spaces).")
    key = row.username.lower()
    if key in seen:
        problems.append(f"The username “{row.username}” is also on line {seen[key]}.")
    if key in existing:
        return problems
    if row.email:
        try:
            validate_email(row.email)
        except ValidationError:
            problems.append(f"“{row.email}” is not a valid email address.")
        email_key = row.email.lower()
        if email_key in seen_emails:
            problems.append(f"The email address “{row.email}” is also on line {seen_emails[email_key]}.")
        if email_key in by_email:  # whose it is stays private: the student can join with the invite code
            problems.append(f"The email address “{row.email}” cannot be used for a new account. Leave it "
                            "empty, or give the student the cohort's invite link.")
    first, last = _split_name(row.name)
    if len(first) > NAME_PART_LENGTH or len(last) > NAME_PART_LENGTH:
        problems.append("The name is too long (at most 150 characters for each of first and last name).")
    return problems


def check(rows: list[RosterRow]) -> list[RowProblem]:
    """Every problem in the rows, in line order; touches nothing."""
    User = get_user_model()
    names = {row.username.lower() for row in rows if row.username}
    emails = {row.email.lower() for row in rows if row.email}
    existing = {user.username.lower(): user for user in _matching(User, "username", names)}
    by_email = {user.email.lower(): user for user in _matching(User, "email", emails)}
    seen: dict[str, int] = {}
    seen_emails: dict[str, int] = {}
    problems = []
    for row in rows:
        problems += [RowProblem(row.line, row.username, message)
                     for message in _row_problems(row, existing, by_email, seen, seen_emails)]
        if row.username:
            seen.setdefault(row.username.lower(), row.line)
        if row.email:
            seen_emails.setdefault(row.email.lower(), row.line)
    return problems


def _matching(model, field_name: str, lowered: set[str]) -> QuerySet:
    """Rows whose `field_name`, lower-cased, is one of `lowered` (one query, any database)."""
    if not lowered:
        return model.objects.none()
    return model.objects.annotate(lowered_value=Lower(field_name)).filter(lowered_value__in=lowered)


def _taught_students(cohort: Cohort, by) -> set[int]:
    """Accounts `by` already teaches in another cohort: moving them between one's own sections needs no consent."""
    if by is None:
        return set()
    return set(Enrollment.objects.filter(cohort__in=Cohort.objects.taught_by(by)).exclude(cohort=cohort)
               .values_list("user_id", flat=True))


@transaction.atomic
def import_rows(cohort: Cohort, rows: list[RosterRow], by=None) -> ImportReport:
    """Check every row; import all of them only when none has a problem (otherwise change nothing).

    `by` is the importing instructor: new accounts are recorded as made by them, invitations as sent by them."""
    report = ImportReport(problems=check(rows))
    if report.problems:
        return report
    User = get_user_model()
    enrolled = set(cohort.enrollments.values_list("user_id", flat=True))
    taught = _taught_students(cohort, by)
    existing = {user.username.lower(): user for user in _matching(User, "username", {r.username.lower() for r in rows})}
    for row in rows:
        user = existing.get(row.username.lower())
        if user is None:
            first, last = _split_name(row.name)
            user = User(username=row.username, email=row.email, first_name=first, last_name=last)
            user.set_unusable_password()  # until the student opens their set-password link
            user.save()
            ProvisionedAccount.objects.create(user=user, cohort=cohort, created_by=by)
            Enrollment.objects.create(cohort=cohort, user=user, source=Enrollment.Source.IMPORT)
            report.rows.append(RowOutcome(row.line, row.username, CREATED, user))
        elif user.pk in enrolled:
            report.rows.append(RowOutcome(row.line, row.username, ALREADY, user))
        elif user.pk in taught and not is_teacher(user):
            Enrollment.objects.create(cohort=cohort, user=user, source=Enrollment.Source.IMPORT)
            enrolled.add(user.pk)
            report.rows.append(RowOutcome(row.line, row.username, ENROLLED, user))
        else:
            Invitation.objects.get_or_create(cohort=cohort, user=user,
                                             defaults={"username_typed": row.username, "invited_by": by})
            report.rows.append(RowOutcome(row.line, row.username, INVITED))
    return report


def import_text(cohort: Cohort, text: str, by=None) -> ImportReport:
    """Parse and import; a file-level problem is raised as RosterFileError (nothing imported)."""
    rows, ignored = parse(text)
    report = import_rows(cohort, rows, by)
    report.ignored_columns = ignored
    return report


# --- Invite code, removal, who counts ---------------------------------------------------------------------

def join(cohort: Cohort, user) -> bool:
    """Enroll `user` by the cohort's invite code; False when they already were. Teachers are refused
    (ValueError), as is a closed cohort."""
    if is_teacher(user):
        raise ValueError("Instructor and staff accounts cannot join a cohort as students.")
    if not cohort.joining_open:
        raise ValueError("This cohort is not taking new students by invite code; ask your instructor.")
    _, created = Enrollment.objects.get_or_create(cohort=cohort, user=user,
                                                  defaults={"source": Enrollment.Source.INVITE})
    return created


def remove(cohort: Cohort, user_id: int) -> bool:
    """Unenroll (the account and its progress stay); False when they were not enrolled."""
    deleted, _ = Enrollment.objects.filter(cohort=cohort, user_id=user_id).delete()
    return bool(deleted)


def class_students(cohort: Cohort) -> QuerySet:
    """The users a cohort's figures count: enrolled, and not a teacher (an account made instructor or staff
    after enrolling, or named this cohort's teacher, stays out of the figures)."""
    User = get_user_model()
    return (User.objects.filter(enrollments__cohort=cohort, is_active=True)
            .exclude(pk__in=teachers().values("pk")).exclude(taught_cohorts=cohort).order_by("username"))


def may_get_set_password_link(user, cohort: Cohort) -> bool:
    """Whether `cohort`'s instructors may get a set-password link for `user`: only an account this cohort's
    import made, whose owner has not signed in, set a password, or launched from an LMS (an LTI identity is a
    sign-in of its own that nobody but its owner may turn into a password)."""
    provisioned = getattr(user, "provisioned", None)
    return (provisioned is not None and provisioned.cohort_id == cohort.pk and user.last_login is None
            and not user.has_usable_password() and not user.lti_identities.exists())


def set_password_link(request, user, cohort: Cohort) -> str:
    """An absolute link where `user` chooses a password (Django's reset link, which expires and works once; no
    email involved). PermissionError for an account `may_get_set_password_link` refuses."""
    if not may_get_set_password_link(user, cohort):
        raise PermissionError(f"no set-password link for {user.pk}: the account was not made by this cohort's import")
    path = reverse("password_reset_confirm", kwargs={"uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
                                                     "token": default_token_generator.make_token(user)})
    return request.build_absolute_uri(path)


def awaiting_password(cohort: Cohort) -> list:
    """Enrolled students whose account this cohort's import made and who have not taken it over yet (they need
    their link)."""
    candidates = (class_students(cohort).filter(provisioned__cohort=cohort, last_login__isnull=True)
                  .select_related("provisioned"))
    return [user for user in candidates if may_get_set_password_link(user, cohort)]


# --- Invitations: an existing account joins only when its owner says so ----------------------------------

def pending_invitations(user) -> QuerySet:
    return Invitation.objects.filter(user=user).select_related("cohort")


def answer_invitation(invitation: Invitation, accept: bool) -> bool:
    """The owner's answer: accept enrolls them (ValueError for a teacher account), decline forgets the invitation.
    True when they are now enrolled."""
    cohort, user = invitation.cohort, invitation.user
    with transaction.atomic():
        invitation.delete()
        if not accept:
            return False
        if is_teacher(user):
            raise ValueError("Instructor and staff accounts cannot join a cohort as students.")
        Enrollment.objects.get_or_create(cohort=cohort, user=user, defaults={"source": Enrollment.Source.INVITE})
    return True
