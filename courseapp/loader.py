"""Load `content/` into the database (all or nothing) and export the database back to files."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from .content import (
    TRACKS_FILE,
    ModuleFile,
    parse_module_file,
    parse_tracks_file,
    serialize_module,
    serialize_tracks,
)
from .models import Module, Track
from .rendering import ContentError, RenderedModule, render_markdown


class CourseLoadError(Exception):
    """One or more content errors; nothing was written to the database."""

    def __init__(self, errors: list[ContentError]):
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


@dataclass
class LoadReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    tracks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def is_module_file(path: Path) -> bool:
    """Every `*.md` in the content directory is a module, except README.md and `_draft-notes.md`-style files."""
    return path.name.lower() != "readme.md" and not path.name.startswith(("_", "."))


def render_module_file(module: ModuleFile) -> RenderedModule:
    """Render a parsed file's body, with errors located at file lines."""
    try:
        return render_markdown(module.body)
    except ContentError as exc:
        raise exc.shifted(module.body_line - 1).at(module.path) from None


def load_course(path: Path | str) -> LoadReport:
    """Load one module file or a content directory idempotently, in one transaction.

    Every file is parsed and validated before anything is written; on any error `CourseLoadError`
    lists them all (``file:line: message``) and the database is left untouched.
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

    parsed: list[tuple[ModuleFile, RenderedModule]] = []
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
            errors.append(ContentError(f"slug '{module.slug}' is already used by {seen[module.slug].path}",
                                       module.line_of("slug"), module.path))
        seen[module.slug] = module
        if module.track not in known_tracks:
            errors.append(ContentError(
                f"unknown track '{module.track}': define it in {tracks_path} (known: "
                f"{', '.join(sorted(known_tracks)) or 'none'})", module.line_of("track"), module.path))
    for module, _ in parsed:
        for slug in module.prerequisites:
            if slug not in seen and slug not in known_modules:
                errors.append(ContentError(f"prerequisite '{slug}' is not a module (no {slug}.md and not in "
                                           "the database)", module.line_of("prerequisites"), module.path))
    errors.extend(_prerequisite_cycles(seen))
    if errors:
        raise CourseLoadError(errors)

    report = LoadReport()
    with transaction.atomic():
        for track in tracks:
            Track.objects.update_or_create(
                slug=track.slug, defaults={"title": track.title, "order": track.order, "summary": track.summary}
            )
            report.tracks.append(track.slug)
        track_rows = {t.slug: t for t in Track.objects.all()}
        existing = {m.slug: m for m in Module.objects.filter(slug__in=seen)}
        for module, rendered in parsed:
            row = existing.get(module.slug) or Module(slug=module.slug)
            # Derived fields are always re-rendered (the renderer or a demo embed may have changed);
            # "unchanged" reports that the authored content is the same.
            before = authored(row) if row.pk else None
            save_module(row, module.front_matter, module.body, rendered, track_rows[module.track],
                        reason=f"Loaded from {Path(module.path).name}")
            if before is None:
                report.created.append(module.slug)
            elif before == authored(row):
                report.unchanged.append(module.slug)
            else:
                report.updated.append(module.slug)
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
            errors.append(ContentError(f"prerequisites form a cycle: {' → '.join(cycle)}",
                                       module.line_of("prerequisites"), module.path))
    return errors


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
    return row


def export_course(directory: Path | str) -> list[Path]:
    """Write tracks.yaml and every module (drafts included) in the canonical file format."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    tracks_path = directory / TRACKS_FILE
    tracks_path.write_text(serialize_tracks(Track.objects.order_by("order", "slug")), encoding="utf-8", newline="\n")
    written.append(tracks_path)
    for row in Module.objects.select_related("track").order_by("track__order", "order", "slug"):
        target = directory / f"{row.slug}.md"
        target.write_text(serialize_module(_front_matter(row), row.source), encoding="utf-8", newline="\n")
        written.append(target)
    return written
