"""A course zip import in two steps: the upload is kept aside and its effect shown as diffs; only a
confirmation applies it.

`stage` keeps the uploaded zip, drafts and all, with an unguessable token in a private directory (never under
MEDIA_ROOT, which a web server may serve as it is): `COURSE_IMPORT_PENDING_DIR`, by default var/pending-imports/;
`preview` runs the real import inside a transaction it
rolls back, so what it shows is exactly what a confirmed import does, validated by the same code; its
`digest` names that effect, and `apply` imports only when the course still gives the same one (a module
edited in between is shown again rather than overwritten unseen). `discard` (cancel) deletes the upload.

Nothing is left behind: a preview or an apply that fails in any way deletes the zip it read (a refused zip is
not kept for a second look, and an unexpected error must not leave uploads piling up), and each new upload
first sweeps the ones older than `KEEP_SECONDS` (so no cron job is needed for those nobody confirmed).
"""
from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction

from courseapp.content import serialize_tracks
from courseapp.loader import LoadReport, module_text
from courseapp.models import Module, Track

from .archive import import_zip
from .diffs import DiffRow, content_digest, diff_rows, diff_stats

TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{20,64}$")
KEEP_SECONDS = 24 * 3600  # an import nobody confirmed or cancelled is deleted a day later


@dataclass
class FileChange:
    """One file of the zip that changes the course: a new module, a changed one, or tracks.yaml."""

    name: str
    title: str
    created: bool
    rows: list[DiffRow]
    added: int
    removed: int


@dataclass
class Preview:
    report: LoadReport
    changes: list[FileChange] = field(default_factory=list)
    digest: str = ""


def _directory() -> Path:
    return Path(settings.COURSE_IMPORT_PENDING_DIR)


def path_of(token: str) -> Path | None:
    """The staged zip of `token`, or None (unknown, expired or malformed token)."""
    if not isinstance(token, str) or not TOKEN_RE.match(token):
        return None
    path = _directory() / f"{token}.zip"
    return path if path.is_file() else None


def sweep() -> None:
    """Delete the staged zips older than `KEEP_SECONDS`: imports nobody confirmed or cancelled."""
    cutoff = time.time() - KEEP_SECONDS
    for old in _directory().glob("*.zip"):
        try:
            if old.stat().st_mtime < cutoff:
                old.unlink()
        except FileNotFoundError:  # another web process confirmed, cancelled or swept it meanwhile
            pass


@contextmanager
def _removed_on_failure(path: Path) -> Iterator[None]:
    """Delete `path` when the block raises anything, then let the error go on."""
    try:
        yield
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def stage(upload) -> str:
    """Keep an uploaded zip until it is confirmed or cancelled; returns its token. Sweeps old ones first."""
    directory = _directory()
    directory.mkdir(parents=True, exist_ok=True)
    sweep()
    token = secrets.token_urlsafe(24)
    path = directory / f"{token}.zip"
    with open(path, "xb") as sink, _removed_on_failure(path):  # a disk that fills up leaves no half zip
        for chunk in upload.chunks():
            sink.write(chunk)
    return token


def discard(token: str) -> None:
    path = path_of(token)
    if path is not None:
        path.unlink(missing_ok=True)


def _course_texts() -> tuple[dict[str, tuple[str, str]], str]:
    """({slug: (title, file text)}, tracks.yaml text) as the database holds them now."""
    modules = {m.slug: (m.title, module_text(m)) for m in Module.objects.select_related("track")}
    return modules, serialize_tracks(Track.objects.order_by("order", "slug"))


def preview(path: Path) -> Preview:
    """What importing the zip at `path` would change; raises `CourseLoadError` as the import would (and then
    the zip is deleted, as on any other error). Nothing is written: the import runs in a transaction that is
    rolled back."""
    with _removed_on_failure(path), transaction.atomic():
        before, tracks_before = _course_texts()
        with open(path, "rb") as fileobj:
            report = import_zip(fileobj)
        after, tracks_after = _course_texts()
        transaction.set_rollback(True)
    result = Preview(report)
    if tracks_after != tracks_before:
        rows = diff_rows(tracks_before, tracks_after)
        result.changes.append(FileChange("tracks.yaml", "Tracks", False, rows, *diff_stats(rows)))
    for slug, (title, text) in after.items():
        old = before.get(slug, (None, ""))[1]
        if text != old:
            rows = diff_rows(old, text)
            result.changes.append(FileChange(f"{slug}.md", title, slug not in before, rows, *diff_stats(rows)))
    result.digest = content_digest(repr([(before, tracks_before), (after, tracks_after)]))
    return result


def apply(path: Path, digest: str) -> Preview | LoadReport:
    """Import the zip if it still does what the preview named by `digest` showed: its `LoadReport`; else the
    new `Preview`, to show again (nothing was written). On any error the zip is deleted."""
    with _removed_on_failure(path), transaction.atomic():
        current = preview(path)
        if current.digest != digest:
            return current
        with open(path, "rb") as fileobj:
            return import_zip(fileobj)
