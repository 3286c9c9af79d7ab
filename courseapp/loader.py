"""Load `content/` into the database (all or nothing) and export the database back to files.

Once a module is in the database, the database is its source of truth: a load applies a content file only
when the file changed since it was last loaded or exported *and* the module was not edited on the web since
(`edited_on_web`); a file changed on both sides is a conflict, reported and left for an instructor to resolve
(`authoring.content_sync`), never applied silently. Each module records what the two last agreed on:
`synced_file_hash` (the file's text) and `synced_hash` (the module's own file text at that moment).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction

from labs.models import replace_labs

from . import course_assets
from .content import (
    TRACKS_FILE,
    ModuleFile,
    parse_module_file,
    parse_tracks_file,
    serialize_module,
    serialize_tracks,
)
from .models import Module, Track
from .quiz_ids import with_stable_ids
from .content_error import ContentError, CourseLoadError
from .rendering import RenderedModule, render_markdown

LOADED_REASON = "Loaded from"


@dataclass(frozen=True)
class Conflict:
    """A content file changed on disk while its module was edited on the web: neither side was applied."""

    slug: str
    path: str

    def __str__(self) -> str:
        return (f"CONFLICT {self.path}: changed on disk and edited on the web since it was last loaded or "
                "exported; the file was not applied.")


@dataclass
class LoadReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # edited on the web, file unchanged: the web version stays
    conflicts: list[Conflict] = field(default_factory=list)
    tracks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def module_text(row: Module) -> str:
    """The module as its content file would be written (`export_course`)."""
    return serialize_module(*authored(row))


def edited_on_web(row: Module) -> bool:
    """Changed in the database since content/ and it last agreed, or holding unpublished changes.

    A module loaded before this record existed (blank `synced_hash`) counts as edited unless its newest
    revision is a load: when in doubt, a load reports a conflict rather than overwrite an instructor's work.
    """
    if hasattr(row, "pending_draft"):
        return True
    if row.synced_hash:
        return text_hash(module_text(row)) != row.synced_hash
    latest = row.history.order_by("-history_date", "-history_id").first()
    return latest is None or not (latest.history_change_reason or "").startswith(LOADED_REASON)


def record_sync(row: Module, disk_text: str) -> None:
    """Content file and module agree now: `disk_text` is the file's text, the module as stored is the other side."""
    row.synced_file_hash, row.synced_hash = text_hash(disk_text), text_hash(module_text(row))
    Module.objects.filter(pk=row.pk).update(synced_file_hash=row.synced_file_hash, synced_hash=row.synced_hash)


def shown_path(path: Path | str) -> str:
    """A content file as messages name it: ``content/kv-cache.md``."""
    path = Path(path)
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def is_module_file(path: Path) -> bool:
    """Every `*.md` in the content directory is a module, except README.md and `_draft-notes.md`-style files."""
    return path.name.lower() != "readme.md" and not path.name.startswith(("_", "."))


def render_module_file(module: ModuleFile) -> RenderedModule:
    """Render a parsed file's body, with errors located at file lines. The quiz ids the file lacks are
    written into `module.body`, as the database will store it."""
    try:
        module.body, rendered = with_stable_ids(module.body, render_markdown(module.body), render_markdown)
        return rendered
    except ContentError as exc:
        raise exc.shifted(module.body_line - 1).at(module.path) from None


def load_course(path: Path | str, *, force: bool = False, imported: bool = False) -> LoadReport:
    """Load one module file or a content directory, in one transaction; never overwrite web edits.

    Every file is parsed and validated before anything is written; on any error `CourseLoadError`
    lists them all (``file:line: message``) and the database is left untouched. Per file: a new module is
    created; a file unchanged since it was last loaded or exported changes nothing; a changed file is
    applied when its module was not edited on the web since, and is a `Conflict` (reported, not applied)
    when it was. `force` applies every file whatever was edited on the web (a deliberate reload).
    `imported` is a zip import: every file is applied and the content/ record is left as it was, so the
    import counts as a web edit for the next load of content/.
    """
    path = Path(path)
    if not path.exists():
        raise CourseLoadError([ContentError("no such file or directory", None, str(path))])
    files = [path] if path.is_file() else sorted(p for p in path.glob("*.md") if is_module_file(p))
    tracks_path = (path.parent if path.is_file() else path) / TRACKS_FILE
    errors: list[ContentError] = []

    tracks = []
    if tracks_path.exists():
        try:
            tracks = parse_tracks_file(tracks_path)
        except ContentError as exc:
            errors.append(exc)

    assets = course_assets.read(path) if path.is_dir() else course_assets.Assets()  # images, reference runs
    errors.extend(assets.errors)
    parsed: list[tuple[ModuleFile, RenderedModule]] = []
    with course_assets.runs_in_view(assets):
        for file in files:
            try:
                module = parse_module_file(file)
                parsed.append((module, render_module_file(module)))
            except ContentError as exc:
                errors.append(exc)

    known_tracks = {t.slug for t in tracks} | set(Track.objects.values_list("slug", flat=True))
    known_modules = set(Module.objects.values_list("slug", flat=True))
    seen: dict[str, ModuleFile] = {}
    for module, _ in parsed:
        if module.slug in seen:
            errors.append(module.error(f"slug '{module.slug}' is already used by {seen[module.slug].path}", "slug"))
        seen[module.slug] = module
        if module.track not in known_tracks:
            errors.append(module.error(
                f"unknown track '{module.track}': define it in {tracks_path} (known: "
                f"{', '.join(sorted(known_tracks)) or 'none'})", "track"))
    for module, _ in parsed:
        for slug in module.prerequisites:
            if slug not in seen and slug not in known_modules:
                errors.append(module.error(f"prerequisite '{slug}' is not a module (no {slug}.md and not in "
                                           "the database)", "prerequisites"))
    errors.extend(_prerequisite_cycles(seen))
    if errors:
        raise CourseLoadError(errors)

    report = LoadReport()
    deleted = set(Module.all_objects.filter(slug__in=seen, deleted_at__isnull=False).values_list("slug", flat=True))
    with transaction.atomic():
        for track in tracks:
            Track.objects.update_or_create(
                slug=track.slug, defaults={"title": track.title, "order": track.order, "summary": track.summary}
            )
            report.tracks.append(track.slug)
        track_rows = {t.slug: t for t in Track.objects.all()}
        existing = {m.slug: m for m in Module.objects.select_related("track", "pending_draft").filter(slug__in=seen)}
        for module, rendered in parsed:
            if module.slug in deleted:  # deleted on the web: the delete stands until an author undoes it
                report.notes.append(f"{shown_path(module.path)} was not loaded: its module was deleted on the "
                                    "authoring page (undo the delete there to load it)")
                continue
            row = existing.get(module.slug)
            disk_text = Path(module.path).read_text(encoding="utf-8")
            reason = f"{'Imported from' if imported else LOADED_REASON} {shown_path(module.path)}"
            if row is None:
                row = save_module(Module(slug=module.slug), module.front_matter, module.body, rendered,
                                  track_rows[module.track], reason=reason)
                report.created.append(module.slug)
            elif not (force or imported) and row.synced_file_hash == text_hash(disk_text):
                rerender(row)  # the renderer or a demo may have changed; what the author wrote did not
                (report.kept if edited_on_web(row) else report.unchanged).append(module.slug)
                continue
            elif authored(row) == (file_front_matter(module), normalize_newlines(module.body)):
                rerender(row)
                report.unchanged.append(module.slug)
            elif force or imported or not edited_on_web(row):
                save_module(row, module.front_matter, module.body, rendered, track_rows[module.track], reason=reason)
                report.updated.append(module.slug)
            else:
                report.conflicts.append(Conflict(module.slug, shown_path(module.path)))
                continue
            if not imported:
                record_sync(row, disk_text)
        report.notes += course_assets.apply(assets, replace=force or imported)
    stray = sorted(known_modules - set(seen))
    if stray and path.is_dir():
        report.notes.append(f"in the database but not in {path} (left as is; run exportcourse to write them): "
                            + ", ".join(stray))
    return report


def prerequisite_cycle(graph: dict[str, list[str]], start: str) -> list[str] | None:
    """A path start → … → start through `graph` (slug → prerequisite slugs), or None."""
    stack, visited = [(start, [start])], set()
    while stack:
        slug, path = stack.pop()
        for nxt in graph.get(slug, []):
            if nxt == start:
                return path + [start]
            if nxt not in visited:
                visited.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


def _prerequisite_cycles(files: dict[str, ModuleFile]) -> list[ContentError]:
    """Modules that (indirectly) list themselves as prerequisites, each cycle reported once."""
    graph = dict(Module.objects.exclude(slug__in=files).values_list("slug", "prerequisites"))
    graph.update({slug: module.prerequisites for slug, module in files.items()})
    errors, reported = [], set()
    for start, module in files.items():
        cycle = prerequisite_cycle(graph, start)
        if cycle and frozenset(cycle) not in reported:
            reported.add(frozenset(cycle))
            errors.append(module.error(f"prerequisites form a cycle: {' → '.join(cycle)}", "prerequisites"))
    return errors


def rerender(row: Module) -> None:
    """Re-derive the HTML, cues and quiz rows from the stored text (no revision: the text is unchanged).
    A text today's renderer refuses keeps what it had: the editor shows the error on its next save."""
    try:
        rendered = render_markdown(row.source)
    except ContentError:
        return
    row.apply_render(rendered)
    row.save_without_historical_record()
    row.replace_quiz(rendered.questions)
    replace_labs(row, rendered.labs)


def file_front_matter(module: ModuleFile) -> dict:
    """A parsed file's front matter in the shape `authored` gives a row."""
    return {**module.front_matter, "prerequisites": list(module.prerequisites)}


def _front_matter(row: Module) -> dict:
    return {
        "title": row.title, "short_title": row.short_title, "slug": row.slug,
        "track": row.track.slug if row.track_id else None, "order": row.order,
        "prerequisites": list(row.prerequisites), "summary": row.summary, "draft": row.draft,
    }


def normalize_newlines(text: str) -> str:
    """LF only, as in the files (form fields arrive with CRLF)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def authored(row: Module) -> tuple[dict, str]:
    """What an author wrote: the front matter and the body (everything else is derived from them)."""
    return _front_matter(row), row.source


def stored_authored(row: Module) -> tuple[dict, str] | None:
    """What the database holds for `row` (a ModelForm writes its edits onto the instance before saving)."""
    stored = Module.objects.select_related("track").filter(pk=row.pk).first() if row.pk else None
    return authored(stored) if stored else None


def save_module(row: Module, front_matter: dict, body: str, rendered: RenderedModule, track: Track,
                reason: str = "") -> Module:
    """Write front matter, body and everything derived from them (quiz rows included).

    A revision is kept (with `reason`, and the request's user as author) only when what an author wrote
    changed: re-rendering an unchanged module, as every content load does, adds none.
    """
    before = stored_authored(row)
    body = normalize_newlines(body)
    row.title = front_matter["title"]
    row.short_title = front_matter.get("short_title") or ""
    row.slug = front_matter["slug"]
    row.track = track
    row.order = front_matter["order"]
    row.prerequisites = list(front_matter.get("prerequisites") or [])
    row.summary = front_matter.get("summary") or ""
    row.draft = bool(front_matter.get("draft"))
    row.source = body
    row.apply_render(rendered)
    if before == authored(row):
        row.save_without_historical_record()
    else:
        row._change_reason = reason[:100] or None
        try:
            row.save()
        finally:  # the reason must not leak into a later save of the same object (e.g. a publish)
            del row._change_reason
    row.replace_quiz(rendered.questions)
    replace_labs(row, rendered.labs)
    return row


def is_content_dir(directory: Path | str) -> bool:
    return Path(directory).resolve() == Path(settings.CONTENT_DIR).resolve()


def export_module(row: Module, directory: Path | str, record: bool) -> Path:
    """Write one module's file; with `record`, file and module agree from now on (see `record_sync`)."""
    target = Path(directory) / f"{row.slug}.md"
    text = serialize_module(_front_matter(row), row.source)
    target.write_text(text, encoding="utf-8", newline="\n")
    if record:
        record_sync(row, text)
    return target


def changed_on_disk(row: Module, directory: Path | str) -> bool:
    """The module's file changed since it was last loaded or exported, to something else than the module:
    a change not loaded yet (or a conflict), which an export must not overwrite."""
    path = Path(directory) / f"{row.slug}.md"
    if not row.synced_file_hash or not path.is_file():
        return False
    text = path.read_text(encoding="utf-8", errors="replace")
    return text_hash(text) != row.synced_file_hash and text != module_text(row)


def export_course(directory: Path | str, record: bool | None = None) -> list[Path]:
    """Write tracks.yaml and every module (drafts included) in the canonical file format.

    An export to content/ (or with `record`) is what a later load compares against: the files written are
    the modules as they are now, so none of them counts as edited on the web any more; a file that changed
    on disk since it was last loaded or exported is left as it is (not in the list returned), since writing
    it would lose that change. An export elsewhere (a zip, a copy) writes every module and records nothing.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    record = is_content_dir(directory) if record is None else record
    written = []
    tracks_path = directory / TRACKS_FILE
    tracks_path.write_text(serialize_tracks(Track.objects.order_by("order", "slug")), encoding="utf-8", newline="\n")
    written.append(tracks_path)
    for row in Module.objects.select_related("track").order_by("track__order", "order", "slug"):
        if record and changed_on_disk(row, directory):
            continue
        written.append(export_module(row, directory, record))
    written += course_assets.write(directory, [p.stem for p in written if p.suffix == ".md"])
    return written


def not_exported(written: list[Path]) -> list[str]:
    """The modules an `export_course` left out (their files changed on disk since)."""
    names = {path.name for path in written}
    return [slug for slug in Module.objects.order_by("slug").values_list("slug", flat=True)
            if f"{slug}.md" not in names]
