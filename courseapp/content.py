"""The on-disk course format: `content/tracks.yaml` and one `content/<slug>.md` per module.

`parse_module_file` / `parse_tracks_file` turn text into plain dataclasses and raise `ContentError`
naming the file and line; `serialize_module` / `serialize_tracks` write the canonical form back, so a
canonical file survives load → export byte for byte.

Canonical module file::

    ---
    title: The KV cache
    short_title: KV cache            (omitted when empty)
    slug: kv-cache                   (must match the file name: kv-cache.md)
    track: llm-inference
    order: 2
    prerequisites: [prefill-decode]
    summary: One sentence.           (omitted when empty)
    draft: false
    ---
    Markdown body…
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import safe_yaml, yaml_errors
from .content_error import ContentError
from .quiz_parse import LineLoader

SLUG_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
FRONT_MATTER_FIELDS = ("title", "short_title", "slug", "track", "order", "prerequisites", "summary", "draft")
REQUIRED_FIELDS = ("title", "slug", "track", "order")
COMPUTED_FIELDS = {"reading_time", "reading_minutes", "duration", "narration_length", "word_count"}
TRACK_FIELDS = ("slug", "title", "order", "summary")
TRACKS_FILE = "tracks.yaml"
MAX_ORDER = 2**31 - 1  # the largest value every database's integer column holds (PostgreSQL's is 32-bit)


@dataclass
class ModuleFile:
    path: str
    title: str
    slug: str
    track: str
    order: int
    short_title: str = ""
    prerequisites: list[str] = field(default_factory=list)
    summary: str = ""
    draft: bool = False
    body: str = ""
    body_line: int = 1  # file line of the body's first line
    field_lines: dict[str, int] = field(default_factory=dict)

    def line_of(self, key: str) -> int:
        return self.field_lines.get(key, 1)

    def error(self, message: str, key: str) -> ContentError:
        """A mistake in front matter field `key`, located at its line."""
        return ContentError(message, self.line_of(key), self.path, body_start=self.body_line)

    @property
    def front_matter(self) -> dict:
        return {name: getattr(self, name) for name in FRONT_MATTER_FIELDS}


@dataclass
class TrackFile:
    slug: str
    title: str
    order: int
    summary: str = ""
    line: int = 1


# --- Parsing ---------------------------------------------------------------------------------


def lesson_start(lines: list[str]) -> int:
    """The index of a module file's first lesson line: just after the front matter's closing ``---``
    (0 for a text without front matter)."""
    if not lines or lines[0].rstrip() != "---":
        return 0
    return next((i + 1 for i in range(1, len(lines)) if lines[i].rstrip() == "---"), 0)


def read_utf8(path: Path) -> str:
    """A course file's text; a ContentError naming the file when it is not UTF-8 (a latin-1 export, say)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        data = path.read_bytes()
        start = lesson_start(data.decode("utf-8", errors="replace").split("\n")) if path.suffix == ".md" else 0
        raise ContentError(f"the file is not UTF-8 text ({exc.reason} at byte {exc.start}): save it as UTF-8",
                           1 + data[:exc.start].count(b"\n"), str(path), body_start=start + 1 if start else None,
                           ) from None


def parse_module_file(path: Path | str) -> ModuleFile:
    path = Path(path)
    module = parse_module_text(read_utf8(path), str(path))
    if path.stem != module.slug:
        raise module.error(f"slug '{module.slug}' does not match the file name '{path.name}': rename the file "
                           f"to '{module.slug}.md' or change the slug", "slug")
    return module


def parse_module_text(text: str, path: str = "<text>") -> ModuleFile:
    """Parse front matter + body. Errors are located in `path` (file line numbers)."""
    text = text.removeprefix("\ufeff")  # a byte-order mark some editors add
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        raise ContentError("a module file must start with a front matter block: a line '---', then "
                           "'title:', 'slug:', 'track:', 'order:' …, then a closing '---'", 1, path)
    try:
        close = next(i for i in range(1, len(lines)) if lines[i].rstrip() == "---")
    except StopIteration:
        raise ContentError("the front matter opened on line 1 is never closed: add a line '---' after it",
                           1, path) from None
    try:
        return _parse_front_matter(lines, close, path)
    except ContentError as exc:  # located so that the authoring pages can number it as the editor does
        raise ContentError(exc.message, exc.line, exc.path, body_start=close + 2) from None


def _parse_front_matter(lines: list[str], close: int, path: str) -> ModuleFile:
    """The module of a file whose front matter is `lines[1:close]` and whose body follows it."""
    fm_text = "\n".join(lines[1:close])
    body = "\n".join(lines[close + 1:])
    try:
        data = safe_yaml.load(fm_text) if fm_text.strip() else {}
    except yaml.YAMLError as exc:
        problem, line = yaml_errors.describe(exc)
        raise ContentError(f"front matter is not valid YAML: {problem}", 2 + line, path) from None
    if not isinstance(data, dict):
        raise ContentError("front matter must be 'key: value' lines", 2, path)
    field_lines = {}
    for number, line in enumerate(lines[1:close], start=2):
        match = re.match(r"^([^\s:#][^:]*?)\s*:", line)
        if match:
            field_lines.setdefault(match[1], number)

    def fail(message: str, key: str | None = None):
        raise ContentError(message, field_lines.get(key, 1) if key else 1, path)

    for key in data:
        if key in COMPUTED_FIELDS:
            fail(f"'{key}' is computed from the text (reading time, narration length): remove this field", str(key))
        if key not in FRONT_MATTER_FIELDS:
            fail(f"unknown front matter field '{key}'; allowed: {', '.join(FRONT_MATTER_FIELDS)}", str(key))
    for key in REQUIRED_FIELDS:
        if data.get(key) in (None, ""):
            fail(f"front matter is missing the required field '{key}'")

    def text_field(key: str, required: bool = False) -> str:
        value = data.get(key)
        if value is None:
            return ""
        if not isinstance(value, str) or "\n" in value:
            fail(f"'{key}' must be one line of text (got {value!r}); put it in quotes if YAML reads it as "
                 "something else", key)
        return value

    module = ModuleFile(
        path=path,
        title=text_field("title"),
        short_title=text_field("short_title"),
        slug=text_field("slug"),
        track=text_field("track"),
        order=0,
        summary=text_field("summary"),
        body=body,
        body_line=close + 2,
        field_lines=field_lines,
    )
    for key in ("slug", "track"):
        if not SLUG_RE.match(getattr(module, key)):
            fail(f"'{key}' must be a slug (lowercase letters, digits and single '-'), got "
                 f"'{getattr(module, key)}'", key)
    order = data.get("order")
    if not isinstance(order, int) or isinstance(order, bool):
        fail(f"'order' must be a whole number, got {order!r}", "order")
    if not -MAX_ORDER <= order <= MAX_ORDER:
        fail(f"'order' must be between {-MAX_ORDER} and {MAX_ORDER}, got {order}", "order")
    module.order = order
    prerequisites = data.get("prerequisites") or []
    if not isinstance(prerequisites, list) or not all(isinstance(p, str) and SLUG_RE.match(p) for p in prerequisites):
        fail("'prerequisites' must be a list of module slugs, e.g. [prefill-decode, kv-cache]", "prerequisites")
    if module.slug in prerequisites:
        fail("a module cannot be its own prerequisite", "prerequisites")
    module.prerequisites = prerequisites
    draft = data.get("draft", False)
    if not isinstance(draft, bool):
        fail(f"'draft' must be true or false, got {draft!r}", "draft")
    module.draft = draft
    return module


def parse_tracks_file(path: Path | str) -> list[TrackFile]:
    path = Path(path)
    text = read_utf8(path)
    try:
        data = yaml.load(text, Loader=LineLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        problem, line = yaml_errors.describe(exc)
        raise ContentError(f"not valid YAML: {problem}", 1 + line, str(path)) from None
    if not isinstance(data, list):
        raise ContentError("tracks.yaml must be a list of tracks: '- slug: ...' with title, order, summary",
                           1, str(path))
    tracks, seen = [], {}
    for number, item in enumerate(data, start=1):
        if not isinstance(item, dict):
            raise ContentError(f"track {number} must be a mapping with slug, title, order, summary", 1, str(path))
        line = item.pop("__line__") + 1
        unknown = set(item) - set(TRACK_FIELDS)
        if unknown:
            raise ContentError(f"track {number}: unknown field(s) {', '.join(sorted(map(str, unknown)))}; "
                               f"allowed: {', '.join(TRACK_FIELDS)}", line, str(path))
        slug, title, order = item.get("slug"), item.get("title"), item.get("order")
        summary = item.get("summary") or ""
        if not isinstance(slug, str) or not SLUG_RE.match(slug):
            raise ContentError(f"track {number}: 'slug' must be a slug like 'llm-inference'", line, str(path))
        if slug in seen:
            raise ContentError(f"track '{slug}' is defined twice (first on line {seen[slug]})", line, str(path))
        if not isinstance(title, str) or not title.strip():
            raise ContentError(f"track '{slug}' needs a 'title'", line, str(path))
        if not isinstance(order, int) or isinstance(order, bool) or not 0 <= order <= MAX_ORDER:
            raise ContentError(f"track '{slug}': 'order' must be a whole number from 0 to {MAX_ORDER}", line,
                               str(path))
        if not isinstance(summary, str):
            raise ContentError(f"track '{slug}': 'summary' must be text", line, str(path))
        seen[slug] = line
        tracks.append(TrackFile(slug=slug, title=title, order=order, summary=summary, line=line))
    return tracks


# --- Writing ---------------------------------------------------------------------------------


def yaml_scalar(value) -> str:
    """One YAML scalar on one line, quoted only when YAML needs it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    dumped = yaml.safe_dump(value, allow_unicode=True, width=float("inf"))
    if dumped.endswith("\n...\n"):
        dumped = dumped[: -len("\n...\n")]
    return dumped.rstrip("\n")


def serialize_module(front_matter: dict, body: str) -> str:
    lines = ["---"]
    for key in FRONT_MATTER_FIELDS:
        value = front_matter.get(key)
        if key in ("short_title", "summary") and not value:
            continue
        if key == "prerequisites":
            lines.append(f"prerequisites: [{', '.join(yaml_scalar(slug) for slug in value or [])}]")
        else:
            lines.append(f"{key}: {yaml_scalar(value)}")
    lines.append("---")
    return "\n".join(lines) + "\n" + body


def serialize_tracks(tracks) -> str:
    out = []
    for track in tracks:
        out.append(f"- slug: {yaml_scalar(track.slug)}")
        out.append(f"  title: {yaml_scalar(track.title)}")
        out.append(f"  order: {track.order}")
        if track.summary:
            out.append(f"  summary: {yaml_scalar(track.summary)}")
    return "\n".join(out) + "\n"
