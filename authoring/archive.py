"""The course as a zip download, and the import of such a zip (all or nothing, errors at their file and line).

The archive holds the loader's format: tracks.yaml and one ``<slug>.md`` per module, either at the archive
root (what `build_zip` writes) or all inside one top-level folder (what zipping a ``content/`` folder gives);
each module's images, ``images/<slug>/<name>`` with their alt texts in ``images/<slug>/alt.yaml``, and the
demos' reference runs, ``runs/<demo>.json`` (both: course_assets.py, which the loader reads and writes).

An import checks every entry of the zip before it extracts a byte, extracts into a private temporary
directory (never into CONTENT_DIR), and hands that directory to `load_course`, which validates every file
before it writes anything. So a rejected zip leaves the database and the disk exactly as they were.
"""
from __future__ import annotations

import io
import re
import stat
import tempfile
import time
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from django.db import transaction

from courseapp import images
from courseapp.content import TRACKS_FILE
from courseapp.course_assets import ALT_FILE, IMAGES_DIR, RUN_NAME_RE, RUNS_DIR
from courseapp.loader import CourseLoadError, LoadReport, export_course, load_course
from courseapp.rendering import ContentError

MAX_ENTRIES = 500
MAX_UNPACKED_BYTES = 5 * 1024 * 1024  # the whole course is ~160 KB of Markdown; more is a mistake or a zip bomb
COURSE_SUFFIXES = {".md", ".yaml", ".yml"}
CHUNK = 64 * 1024
# What macOS's "Compress" and Finder add beside the files: never course content, skipped rather than refused.
IGNORED_DIR, IGNORED_FILE = "__MACOSX", ".DS_Store"
ASSET_DIRS = (IMAGES_DIR, RUNS_DIR)  # images/<slug>/<name> with alt.yaml; runs/<demo>.json


class ArchiveError(CourseLoadError):
    """The upload is not a course zip this import accepts; nothing was extracted or written."""


@dataclass(frozen=True)
class Member:
    """A file entry that passed every check: `path` is relative, inside the archive, one level deep at most."""

    info: zipfile.ZipInfo
    path: PurePosixPath


def build_zip() -> bytes:
    """The database's course (drafts included) as a zip of exactly the files `export_course` writes.

    Unzipping it into ``content/`` gives byte for byte what the server-side export writes there.
    """
    with tempfile.TemporaryDirectory(prefix="course-export-") as tmp:
        buffer = io.BytesIO()
        stamp = time.localtime()[:6]
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in export_course(tmp):
                archive.writestr(_entry(path.relative_to(tmp).as_posix(), stamp), path.read_bytes())
        return buffer.getvalue()


def _entry(name: str, stamp: tuple) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=stamp)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (stat.S_IFREG | 0o644) << 16  # a plain rw-r--r-- file when unzipped
    return info


def import_zip(fileobj: BinaryIO) -> LoadReport:
    """Load the course in a zip, all or nothing.

    Raises `ArchiveError` for a zip the import refuses (not a zip, unsafe or unexpected entries, too big)
    and `CourseLoadError` for content errors; in both, every error names the file inside the zip (and
    the line, for content), e.g. ``intro.md, lesson line 2: ...`` (`ContentError.shown`), and nothing was
    written to the database.
    """
    with tempfile.TemporaryDirectory(prefix="course-import-") as tmp, transaction.atomic():
        root = Path(tmp)
        course_dir = extract(fileobj, root)
        try:
            report = load_course(course_dir, imported=True)  # an instructor's upload: applied, a web edit
        except CourseLoadError as exc:
            raise CourseLoadError([_inside_zip(error, root) for error in exc.errors]) from None
        report.notes = [_strip_root(note, root) for note in report.notes]
        return report


def extract(fileobj: BinaryIO, root: Path) -> Path:
    """Check the whole zip, then write its course files under `root`; returns the course directory.

    Invariant: nothing is written unless every entry passed; only regular .md/.yaml files land (and the
    images/ and runs/ files of `_asset_problem`), and only
    at ``root/NAME`` or ``root/TOP/NAME``, never more than `MAX_UNPACKED_BYTES` in all.
    """
    try:
        archive = zipfile.ZipFile(fileobj)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise ArchiveError([ContentError("this is not a zip file: export the course as a zip (“Download as "
                                         "zip”), or zip the folder that holds tracks.yaml and the .md files")])
    with archive:
        members, top = plan(archive.infolist())
        unpacked = 0
        for member in members:
            unpacked = _extract_member(archive, member, root, unpacked)
    return root / top if top else root


def plan(infos: list[zipfile.ZipInfo]) -> tuple[list[Member], str | None]:
    """The course files of a zip and its top-level folder (None: files at the root); raises on any problem.

    Every entry is checked and every problem reported at once, except the size limits, which stop the
    check at once (a zip of a million entries is not worth listing).
    """
    if len(infos) > MAX_ENTRIES:
        raise ArchiveError([ContentError(f"the zip has {len(infos)} entries; an import accepts at most "
                                         f"{MAX_ENTRIES} (one .md per module and tracks.yaml)")])
    declared = sum(info.file_size for info in infos)
    if declared > MAX_UNPACKED_BYTES:
        raise ArchiveError([_too_big(declared)])
    errors: list[ContentError] = []
    members: list[Member] = []
    folders: set[str] = set()
    seen: set[str] = set()
    for info in infos:
        parts = PurePosixPath(info.filename).parts
        if parts and (parts[0] == IGNORED_DIR or parts[-1] == IGNORED_FILE):
            continue
        problem = _entry_problem(info, seen)
        seen.add(info.filename)
        asset, top = _asset_entry(parts)
        if problem:
            errors.append(ContentError(problem, None, _printable(info.filename)))
        elif asset:
            if top:
                folders.add(top)
            if not info.is_dir():
                members.append(Member(info, PurePosixPath(*parts)))
        elif info.is_dir():
            folders.add(parts[0])
        else:
            members.append(Member(info, PurePosixPath(*parts)))
            if len(parts) == 2:
                folders.add(parts[0])
    top = _top_folder(members, folders, errors)
    if not errors and not any(m.path.suffix == ".md" or m.path.name == TRACKS_FILE for m in members):
        errors.append(ContentError("the zip holds no tracks.yaml and no module (.md) files"))
    if errors:
        raise ArchiveError(errors)
    return members, top


def _entry_problem(info: zipfile.ZipInfo, seen: set[str]) -> str | None:
    """Why this entry may not be extracted, or None. Paths are judged as written, before any clean-up."""
    name = info.filename
    parts = name.rstrip("/").split("/")
    mode = info.external_attr >> 16
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "the name has control characters"
    if "\\" in name:
        return "the path uses '\\': zip paths separate folders with '/'"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "an absolute path: entries must be relative (e.g. intro.md)"
    if any(part in ("", ".", "..") for part in parts):
        return "the path has '..', '.' or an empty folder name: entries must stay inside the archive"
    if stat.S_ISLNK(mode):
        return "a symbolic link: only plain files are imported"
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
        return "not a plain file: only plain files are imported"
    if info.flag_bits & 0x1:
        return "the entry is encrypted: zip the files without a password"
    if name in seen:
        return "the zip holds this path twice"
    asset, top = _asset_entry(tuple(parts))
    if asset:
        return _asset_problem(parts[1 if top else 0:], info.is_dir())
    if info.is_dir():
        return None if len(parts) == 1 else "nested folders: files go at the archive root or in one top-level folder"
    if len(parts) > 2:
        return "nested folders: files go at the archive root or in one top-level folder"
    return _name_problem(PurePosixPath(name))


def _asset_entry(parts: tuple[str, ...]) -> tuple[bool, str | None]:
    """Whether an entry is in the course's images or runs folder (``images/…``, ``runs/…``, or inside
    ``TOP/``; the folders themselves included), and TOP."""
    if parts and parts[0] in ASSET_DIRS:
        return True, None
    if len(parts) >= 2 and parts[1] in ASSET_DIRS:
        return True, parts[0]
    return False, None


def _asset_problem(parts: list[str], is_dir: bool) -> str | None:
    """``images/<slug>/<image or alt.yaml>`` and ``runs/<demo>.json`` (and those folders) only."""
    if parts[0] == RUNS_DIR:
        if is_dir:
            return None if len(parts) == 1 else "nested folders: reference runs go in runs/<demo>.json"
        if len(parts) != 2 or not RUN_NAME_RE.match(parts[1]):
            return "reference runs go in runs/<demo name>.json (e.g. runs/kv-cache.json)"
        return None
    if is_dir:
        return None if len(parts) <= 2 else "nested folders: images go in images/<module slug>/"
    if len(parts) != 3:
        return "images go in images/<module slug>/NAME.png, with their alt texts in images/<module slug>/alt.yaml"
    if parts[2] != ALT_FILE and not images.NAME_RE.match(parts[2]):
        return ("not an image name: lowercase letters, digits, '-' and '_', then .png, .jpg, .gif or .webp "
                f"(or {ALT_FILE})")
    return None


def _name_problem(path: PurePosixPath) -> str | None:
    """Only the loader's files: modules (.md) and tracks.yaml (another YAML file would be silently unread)."""
    if path.suffix.lower() not in COURSE_SUFFIXES:
        return "not a course file: the zip may hold only tracks.yaml and module .md files"
    if path.suffix.lower() == ".md" and path.suffix != ".md":
        return "module files end in lowercase '.md'"
    if path.suffix.lower() in (".yaml", ".yml") and path.name != TRACKS_FILE:
        return f"only {TRACKS_FILE} is read: rename this file to {TRACKS_FILE}, or leave it out"
    return None


def _top_folder(members: list[Member], folders: set[str], errors: list[ContentError]) -> str | None:
    """The one folder everything is in, or None when everything is at the root; mixing them is an error."""
    at_root = sorted(str(m.path) for m in members if len(m.path.parts) == 1)
    if len(folders) > 1 or (folders and at_root):
        found = ", ".join([f"{f}/" for f in sorted(folders)] + at_root[:3])
        errors.append(ContentError("files must all be at the archive root, or all inside one top-level folder "
                                   f"(found: {found})"))
        return None
    return next(iter(folders), None)


def _extract_member(archive: zipfile.ZipFile, member: Member, root: Path, unpacked: int) -> int:
    """Copy one checked entry; returns `unpacked` plus its size, counting the bytes really unpacked
    (a header may understate them)."""
    target = root.joinpath(*member.path.parts)
    if not target.resolve().is_relative_to(root.resolve()):  # plan() makes this impossible; never trust one check
        raise ArchiveError([ContentError("the path leaves the archive", None, str(member.path))])
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with archive.open(member.info) as source, open(target, "xb") as sink:
            while chunk := source.read(CHUNK):
                unpacked += len(chunk)
                if unpacked > MAX_UNPACKED_BYTES:
                    raise ArchiveError([_too_big(unpacked, at_least=True)])
                sink.write(chunk)
        return unpacked
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
        raise ArchiveError([ContentError(f"the zip is damaged or uses an unsupported format ({exc})", None,
                                         str(member.path))]) from None


def _too_big(size: int, at_least: bool = False) -> ContentError:
    more = "more than " if at_least else ""
    return ContentError(f"the zip unpacks to {more}{size / 1_048_576:.1f} MiB; an import accepts at most "
                        f"{MAX_UNPACKED_BYTES / 1_048_576:.1f} MiB of course files (is it a zip bomb?)")


def _printable(name: str) -> str:
    """An entry name safe to show in one line of an error message."""
    return "".join(c if c.isprintable() else "?" for c in name)


def _strip_root(text: str, root: Path) -> str:
    """The temporary directory is nobody's business: paths read as they are inside the zip."""
    return text.replace(f"{root}/", "").replace(str(root), "the zip")


def _inside_zip(error: ContentError, root: Path) -> ContentError:
    """The same error, its file named as inside the zip (``intro.md``, or ``content/intro.md``)."""
    path = error.path
    if path and Path(path).is_relative_to(root):
        path = Path(path).relative_to(root).as_posix()
    return ContentError(_strip_root(error.message, root), error.line, path, error.body_start)
