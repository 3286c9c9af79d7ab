"""What a course carries beside its Markdown, through every export and every load: each module's images and the
demos' reference runs.

On disk (content/, an exported folder, a course zip) they sit beside the module files:

    images/<slug>/<name>.png     a module's image (PNG, JPEG, GIF or WebP: courseapp/images.py)
    images/<slug>/alt.yaml       its alt texts, one ``name.png: what it shows`` line per image
    runs/<demo>.json             a demo's reference run, which narration step markers replay (demo_cues.py)

`write` (called by `export_course`) writes the images of the modules exported and, into any folder but content/
itself, a copy of content/runs/. `read` (called by `load_course`) checks every image and run of a course folder
before anything is written; `apply` then stores them in the load's transaction: images with their modules, runs
into content/runs/ once the transaction commits (so a refused or previewed import writes no run).

Invariants: a bad file is a `ContentError` naming it (and its line, for YAML and JSON), and then the load writes
nothing. A plain load of content/ adds the images a module lacks and never replaces one uploaded on the web
(a different file is reported, not applied); a zip import or a forced load replaces them. A run whose bytes are
already in content/runs/ is not rewritten.
"""
from __future__ import annotations

import hashlib
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from django.conf import settings
from django.db import transaction

from . import demo_cues, images, safe_yaml, yaml_errors
from .content import read_utf8, yaml_scalar
from .input_limits import InputTooComplex, loads
from .models import Module, ModuleImage
from .content_error import ContentError, CourseLoadError

IMAGES_DIR, ALT_FILE = "images", "alt.yaml"
RUNS_DIR = demo_cues.RUNS_DIR
RUN_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}\.json$")
MAX_RUN_BYTES = 2 * 1024 * 1024  # the kv-cache run is 14 KB; a run of the largest demo stays well under this


@dataclass(frozen=True)
class Image:
    path: Path
    data: bytes
    alt: str


@dataclass(frozen=True)
class Run:
    path: Path
    data: bytes
    run: dict


@dataclass
class Assets:
    """A course folder's images (by module slug) and reference runs (by demo), every one checked."""

    source: Path | None = None
    images: dict[str, list[Image]] = field(default_factory=dict)
    runs: dict[str, Run] = field(default_factory=dict)
    errors: list[ContentError] = field(default_factory=list)


# --- Reading and checking ---------------------------------------------------------------------------------------


def read(directory: Path | str) -> Assets:
    """Every image and reference run under `directory` (a course folder), checked; problems in `.errors`."""
    directory = Path(directory)
    assets = Assets(source=directory)
    if not directory.is_dir():
        return assets
    for folder in sorted(p for p in (directory / IMAGES_DIR).glob("*") if p.is_dir()):
        found = _read_images(folder, assets.errors)
        if found:
            assets.images[folder.name] = found
    for path in sorted(p for p in (directory / RUNS_DIR).glob("*") if not p.name.startswith(".")):
        try:
            assets.runs[path.stem] = read_run(path)
        except ContentError as exc:
            assets.errors.append(exc)
    return assets


def _read_images(folder: Path, errors: list[ContentError]) -> list[Image]:
    alt_path = folder / ALT_FILE
    try:
        alts = safe_yaml.load(read_utf8(alt_path)) if alt_path.is_file() else {}
    except ContentError as exc:
        errors.append(exc)
        return []
    except yaml.YAMLError as exc:
        problem, line = yaml_errors.describe(exc)
        errors.append(ContentError(f"not valid YAML: {problem}", line + 1, str(alt_path)))
        return []
    if not isinstance(alts, dict):
        errors.append(ContentError("write one 'image-name.png: alt text' line per image", 1, str(alt_path)))
        return []
    found = []
    for path in sorted(p for p in folder.iterdir() if p.name != ALT_FILE and not p.name.startswith(".")):
        if not path.is_file() or not images.NAME_RE.match(path.name):
            errors.append(ContentError("not an image name: lowercase letters, digits, '-' and '_', then .png, "
                                       f".jpg, .gif or .webp (or {ALT_FILE})", None, str(path)))
            continue
        alt = alts.get(path.name)
        if not isinstance(alt, str) or not alt.strip():
            errors.append(ContentError(f"{path.name} has no alt text: add '{path.name}: what it shows' to "
                                       f"{ALT_FILE}", None, str(path)))
            continue
        data = path.read_bytes()
        try:
            images.check(data, alt)
        except ValueError as exc:
            errors.append(ContentError(str(exc), None, str(path)))
            continue
        found.append(Image(path, data, alt.strip()))
    return found


def read_run(path: Path) -> Run:
    """A reference run file, checked; ContentError naming the file (and the line, for bad JSON) otherwise."""
    if not RUN_NAME_RE.match(path.name) or not path.is_file():
        raise ContentError(f"not a reference run: {RUNS_DIR}/ holds only <demo>.json files (e.g. "
                           f"{RUNS_DIR}/kv-cache.json)", None, str(path))
    data = path.read_bytes()
    if len(data) > MAX_RUN_BYTES:
        raise ContentError(f"the run is {len(data) / 1_048_576:.1f} MiB; a reference run may be at most "
                           f"{MAX_RUN_BYTES / 1_048_576:.0f} MiB (record a shorter one)", None, str(path))
    try:  # bounded: a zip's run nested 100,000 deep or holding a 5,000-digit number was a 500
        run = loads(data, max_bytes=MAX_RUN_BYTES)
    except UnicodeDecodeError:
        raise ContentError("not UTF-8 text: a reference run is a JSON file", None, str(path)) from None
    except json.JSONDecodeError as exc:
        raise ContentError(f"not valid JSON: {exc.msg}", exc.lineno, str(path)) from None
    except InputTooComplex as exc:
        raise ContentError(f"not a usable reference run: {exc}", None, str(path)) from None
    problem = run_problem(run, path.stem)
    if problem:
        raise ContentError(f"not a reference run: {problem} (scripts/record_reference_run.py writes them)", None,
                           str(path))
    return Run(path, data, run)


def run_problem(run, demo: str) -> str | None:
    """What makes `run` unusable as `demo`'s reference run, or None."""
    from demos.registry import DEMOS

    if not isinstance(run, dict):
        return "the file must hold one JSON object"
    if demo not in DEMOS:
        return f"there is no demo '{demo}' (demos: {', '.join(sorted(DEMOS))})"
    if run.get("demo") != demo:
        return f"its \"demo\" is {json.dumps(run.get('demo'))[:40]}, but the file is named for '{demo}'"
    events = run.get("events")
    if not isinstance(events, list) or not all(isinstance(e, dict) and isinstance(e.get("type"), str)
                                               for e in events):
        return "\"events\" must be a list of events, each an object with a \"type\""
    steps = run.get("steps")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        return "\"steps\" must be a whole number from 0 (how many timeline steps the demo makes from it)"
    return None


@contextmanager
def runs_in_view(assets: Assets):
    """While a course folder is loaded, its step markers are checked against its own runs (a zip may bring a
    lesson and the run it replays together)."""
    with demo_cues.incoming_runs({demo: item.run for demo, item in assets.runs.items()}):
        yield


# --- Storing what a load read -------------------------------------------------------------------------------------


def _is_content_dir(directory: Path | None) -> bool:
    return directory is not None and directory.resolve() == Path(settings.CONTENT_DIR).resolve()


def apply(assets: Assets, *, replace: bool) -> list[str]:
    """Store what `read` found, inside the caller's transaction (after its modules are saved); returns notes.
    Raises `CourseLoadError` (the caller's transaction undoes all) for images of a module that does not exist."""

    notes: list[str] = []
    errors: list[ContentError] = []
    stored = 0
    for slug, found in assets.images.items():
        module = Module.objects.filter(slug=slug).first()
        if module is None:
            if Module.all_objects.filter(slug=slug).exists():
                notes.append(f"The images of '{slug}' were not loaded: its module was deleted on the authoring "
                             "page.")
            else:
                errors.append(ContentError(f"images for '{slug}', which is not a module", None,
                                           str(found[0].path.parent)))
            continue
        current = {row.name: row for row in ModuleImage.objects.filter(module=module)}
        for image in found:
            row = current.get(image.path.name)
            same = row is not None and row.digest == hashlib.sha256(image.data).hexdigest() and row.alt == image.alt
            if same:
                continue
            if row is not None and not replace:
                shown = f"{assets.source.name}/{image.path.relative_to(assets.source).as_posix()}"
                notes.append(f"{shown} differs from the image uploaded on the web: the web's was kept (export the "
                             "course to write it, or load with --force to take the file's).")
                continue
            images.store(module, image.path.name, image.data, image.alt)
            stored += 1
    if errors:
        raise CourseLoadError(errors)
    if stored:
        notes.append(f"{stored} image(s) stored with their modules.")
    if not _is_content_dir(assets.source):
        notes += _install_runs(assets.runs)
    return notes


def _install_runs(runs: dict[str, Run]) -> list[str]:
    """Copy the runs into content/runs/ when the transaction commits; a note for each one that changes."""
    target_dir = Path(settings.CONTENT_DIR) / RUNS_DIR
    changes: list[tuple[Path, bytes]] = []
    notes = []
    for demo, item in sorted(runs.items()):
        target = target_dir / f"{demo}.json"
        try:
            old = target.read_bytes()
        except OSError:
            old = None
        if old == item.data:
            continue
        changes.append((target, item.data))
        notes.append(f"The reference run of '{demo}' ({RUNS_DIR}/{demo}.json) {'replaced' if old else 'added'}.")
    if changes:
        transaction.on_commit(lambda: _write_files(changes))
    return notes


def _write_files(changes: list[tuple[Path, bytes]]) -> None:
    for target, data in changes:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.part")
        partial.write_bytes(data)
        partial.replace(target)  # a reader sees the old run or the new one, never half of one


# --- Writing what an export needs -------------------------------------------------------------------------------


def write(directory: Path | str, slugs: list[str]) -> list[Path]:
    """The images of the modules `slugs` under ``directory/images/<slug>/`` (alt.yaml lines of files not
    uploaded here are kept), and, unless `directory` is content/ itself, content/runs/'s usable runs."""
    directory = Path(directory)
    written = []
    rows = ModuleImage.objects.filter(module__slug__in=slugs, module__deleted_at__isnull=True) \
        .select_related("module").order_by("module__slug", "name")
    by_module: dict[str, list[ModuleImage]] = {}
    for row in rows:
        source = images.file_path(row)
        if source.is_file():
            by_module.setdefault(row.module.slug, []).append(row)
    for slug, found in by_module.items():
        folder = directory / IMAGES_DIR / slug
        folder.mkdir(parents=True, exist_ok=True)
        for row in found:
            target = folder / row.name
            target.write_bytes(images.file_path(row).read_bytes())
            written.append(target)
        written.append(_write_alt(folder, {row.name: row.alt for row in found}))
    if not _is_content_dir(directory):
        written += _copy_runs(directory / RUNS_DIR)
    return written


def _write_alt(folder: Path, alts: dict[str, str]) -> Path:
    path = folder / ALT_FILE
    kept = {}
    if path.is_file():
        try:
            kept = safe_yaml.load(read_utf8(path)) or {}
        except (ContentError, yaml.YAMLError):
            kept = {}
    if not isinstance(kept, dict):
        kept = {}
    merged = {name: alt for name, alt in kept.items()  # files put here by hand, not uploaded: their lines stay
              if isinstance(name, str) and isinstance(alt, str) and (folder / name).is_file()}
    merged.update(alts)
    path.write_text("".join(f"{name}: {yaml_scalar(alt)}\n" for name, alt in sorted(merged.items())),
                    encoding="utf-8", newline="\n")
    return path


def _copy_runs(target_dir: Path) -> list[Path]:
    """content/runs/'s runs that a load would accept (others are unusable on this site too)."""
    written = []
    for path in sorted((Path(settings.CONTENT_DIR) / RUNS_DIR).glob("*.json")):
        try:
            item = read_run(path)
        except ContentError:
            continue
        target_dir.mkdir(parents=True, exist_ok=True)
        target = target_dir / path.name
        target.write_bytes(item.data)
        written.append(target)
    return written
