"""Instructor views that move the whole course: export to content/, the zip download, and the zip import with its
review (nothing is applied before the instructor confirms what the review showed)."""
from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from courseapp.instructors import instructor_required
from courseapp.loader import CourseLoadError, export_course, not_exported

from . import archive, import_review
from .views import _list_context


@require_POST
@instructor_required
def export(request):
    written = export_course(settings.CONTENT_DIR)
    messages.success(request, f"Exported {len(written)} file(s) to {settings.CONTENT_DIR}. Review and commit "
                              "them with git; loading the course again leaves these modules as they are.")
    skipped = not_exported(written)
    if skipped:
        messages.warning(request, f"Not written, since their files changed on disk after they were last loaded: "
                                  f"{', '.join(f'{slug}.md' for slug in skipped)}. Load the course (restart, or "
                                  "manage.py loadcourse) or resolve the conflicts below first.")
    return redirect("authoring:list")


@require_GET
@instructor_required
def export_zip(request):
    """The course as a zip download, in content/'s format (drafts included), built from the database now."""
    response = HttpResponse(archive.build_zip(), content_type="application/zip")
    filename = f"inference-lab-course-{timezone.localdate():%Y%m%d}.zip"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "private, no-store"  # it holds unpublished drafts
    return response


def _mib(size: int) -> str:
    return f"{size / 1_048_576:.1f} MiB"


def _upload_problem(upload) -> str | None:
    """Why an upload cannot even be opened as a course zip, or None."""
    if upload is None:
        return "Choose a .zip file to import."
    if upload.size > settings.COURSE_IMPORT_MAX_BYTES:
        return (f"{upload.name} is {_mib(upload.size)}; an import accepts at most "
                f"{_mib(settings.COURSE_IMPORT_MAX_BYTES)}.")
    return None


IMPORT_SESSION_KEY = "course_import"


def _import_errors(request, errors: list[str], name: str):
    messages.error(request, "Not imported: nothing was changed. Fix the errors below and import again.")
    context = {**_list_context(), "import_errors": errors, "import_name": name}
    return render(request, "authoring/list.html", context, status=400)


@require_POST
@instructor_required
def import_zip(request):
    """Check a course zip and show what it would change; nothing is applied before `import_confirm`.

    On any error the list page shows every error at its file and line (numbered as the editor numbers them)
    and the upload is dropped. A valid zip is kept aside (`import_review.stage`) for this session.
    """
    upload = request.FILES.get("archive")
    problem = _upload_problem(upload)
    if problem:
        return _import_errors(request, [problem], getattr(upload, "name", ""))
    token = import_review.stage(upload)
    try:
        import_review.preview(import_review.path_of(token))
    except CourseLoadError as exc:
        import_review.discard(token)
        return _import_errors(request, [error.shown() for error in exc.errors], upload.name)
    previous = request.session.get(IMPORT_SESSION_KEY)
    if previous:
        import_review.discard(previous["token"])
    request.session[IMPORT_SESSION_KEY] = {"token": token, "name": upload.name}
    return redirect("authoring:import_review")


def _staged(request):
    """(token, zip name, path) of this session's pending import; (None, None, None) when there is none."""
    pending = request.session.get(IMPORT_SESSION_KEY) or {}
    path = import_review.path_of(pending.get("token"))
    return (pending["token"], pending.get("name", ""), path) if path else (None, None, None)


def _review_page(request, name: str, preview, changed_since: bool = False):
    return render(request, "authoring/import_review.html", {
        "name": name, "preview": preview, "changed_since": changed_since,
        "unchanged": len(preview.report.unchanged),
    })


@require_GET
@instructor_required
def import_review_page(request):
    """The pending import's effect, file by file, with "Import" and "Cancel"."""
    token, name, path = _staged(request)
    if path is None:
        messages.info(request, "No import is waiting: choose a course zip to import.")
        return redirect("authoring:list")
    try:
        preview = import_review.preview(path)
    except CourseLoadError as exc:  # the course changed since the upload (a track deleted, say)
        import_review.discard(token)
        request.session.pop(IMPORT_SESSION_KEY, None)
        return _import_errors(request, [error.shown() for error in exc.errors], name)
    return _review_page(request, name, preview)


@require_POST
@instructor_required
def import_confirm(request):
    """Apply the pending import, if it still changes what its review showed (`confirm` = that digest)."""
    token, name, path = _staged(request)
    if path is None:
        messages.error(request, "Nothing was imported: that import was cancelled or has expired. Import the zip again.")
        return redirect("authoring:list")
    try:
        outcome = import_review.apply(path, request.POST.get("confirm", ""))
    except CourseLoadError as exc:
        import_review.discard(token)
        request.session.pop(IMPORT_SESSION_KEY, None)
        return _import_errors(request, [error.shown() for error in exc.errors], name)
    if isinstance(outcome, import_review.Preview):
        return _review_page(request, name, outcome, changed_since=True)
    import_review.discard(token)
    request.session.pop(IMPORT_SESSION_KEY, None)
    messages.success(request, f"Imported {name}: {len(outcome.created)} module(s) created, "
                              f"{len(outcome.updated)} updated, {len(outcome.unchanged)} unchanged; "
                              f"{len(outcome.tracks)} track(s).")
    for note in outcome.notes:
        messages.info(request, note)
    return redirect("authoring:list")


@require_POST
@instructor_required
def import_cancel(request):
    """Drop the pending import: the course stays exactly as it is."""
    token, name, _ = _staged(request)
    if token:
        import_review.discard(token)
        messages.info(request, f"Import of {name} cancelled: nothing was changed.")
    request.session.pop(IMPORT_SESSION_KEY, None)
    return redirect("authoring:list")
