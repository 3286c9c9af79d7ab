"""Conflicts between content/ and the web edits, shown on the authoring page, and their resolution.

A conflict is a content file that changed on disk since its module was last loaded or exported, while the
module was edited on the web (`loader.edited_on_web`). `loadcourse` applies neither side and reports it; the
authoring list shows it, live from the files, with the diff and two ways out: keep the web version (written
to the file, so content/ and the database agree again) or take the file's (a new revision, so the web
version stays in History).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from courseapp.content import parse_module_file
from .diffs import diff_rows, diff_stats, file_text
from courseapp.loader import (
    LOADED_REASON,
    authored,
    edited_on_web,
    export_module,
    file_front_matter,
    is_module_file,
    module_text,
    normalize_newlines,
    prerequisite_cycle,
    record_sync,
    render_module_file,
    save_module,
    shown_path,
    text_hash,
)
from courseapp.models import Module, Track
from courseapp.rendering import ContentError


@dataclass
class PendingConflict:
    module: Module
    path: str  # as messages name it: content/kv-cache.md
    rows: list  # the diff from the web version to the file's
    added: int
    removed: int


def _parsed(path: Path):
    """(parsed file with its quiz ids written in, rendering); ContentError for a file that would not load."""
    module = parse_module_file(path)
    return module, render_module_file(module)


def conflicts(directory: Path | str | None = None) -> list[PendingConflict]:
    """The content files that changed on disk and whose module was edited on the web since (files that
    would not load are left to `loadcourse`, which names their errors)."""
    directory = Path(directory or settings.CONTENT_DIR)
    if not directory.is_dir():
        return []
    rows = {m.slug: m for m in Module.objects.select_related("track", "pending_draft")}
    found = []
    for path in sorted(p for p in directory.glob("*.md") if is_module_file(p)):
        row = rows.get(path.stem)
        if row is None:
            continue
        try:
            disk_text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if row.synced_file_hash == text_hash(disk_text) or not edited_on_web(row):
            continue
        try:
            module, _ = _parsed(path)
        except ContentError:
            continue
        theirs = (file_front_matter(module), normalize_newlines(module.body))
        if theirs == authored(row):
            continue
        diff = diff_rows(module_text(row), file_text(*theirs))
        added, removed = diff_stats(diff)
        found.append(PendingConflict(row, shown_path(path), diff, added, removed))
    return found


def content_path(module: Module) -> Path:
    return Path(settings.CONTENT_DIR) / f"{module.slug}.md"


def keep_web(module: Module) -> Path:
    """Write the module as it is to its content file: file and module agree again."""
    return export_module(module, settings.CONTENT_DIR, record=True)


def take_file(module: Module) -> None:
    """Load the module's content file into it, over the web edits (which stay in History).
    ContentError (nothing changed) when the file does not load."""
    path = content_path(module)
    try:
        parsed, rendered = _parsed(path)
    except OSError as exc:
        raise ContentError(f"cannot read the file ({exc.strerror})", None, shown_path(path)) from None
    track = Track.objects.filter(slug=parsed.track).first()
    if track is None:
        raise ContentError(f"unknown track '{parsed.track}'", parsed.line_of("track"), shown_path(path))
    graph = dict(Module.objects.values_list("slug", "prerequisites"))
    unknown = [slug for slug in parsed.prerequisites if slug not in graph]
    graph[module.slug] = parsed.prerequisites
    cycle = prerequisite_cycle(graph, module.slug)
    if unknown or cycle:
        problem = f"no module {', '.join(unknown)}" if unknown else f"a cycle {' → '.join(cycle)}"
        raise ContentError(f"the prerequisites name {problem}", parsed.line_of("prerequisites"), shown_path(path))
    with transaction.atomic():
        save_module(module, parsed.front_matter, parsed.body, rendered, track,
                    reason=f"{LOADED_REASON} {shown_path(path)} over the web edits")
        record_sync(module, path.read_text(encoding="utf-8"))
