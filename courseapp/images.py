"""A module's images: uploaded with their alt text, stored with the module, written as ``images/NAME``.

A lesson writes ``![alt text](images/diagram.png)``: a relative URL, so the same text works on the student
page (``/modules/<slug>/images/diagram.png``) and in the editor's preview (``/author/<slug>/images/…``); a
course zip keeps them under ``images/<slug>/`` with their alt texts in ``images/<slug>/alt.yaml``. Files are
stored once per content (``MEDIA_ROOT/module-images/<sha256>.<ext>``), so a rolled-back import leaves at most
an unreferenced copy, never a changed image. They are served only through `image_views.image_file`, which
checks the module (nginx sends the bytes it names: docs/deploy.md; no web server serves MEDIA_ROOT as it is).

Only raster formats recognised from their bytes are accepted (PNG, JPEG, GIF, WebP): never SVG, which can
carry script, and never a type guessed from the uploaded name.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from .models import Module, ModuleImage

IMAGE_DIR = "module-images"
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_ALT_CHARS = 500  # ModuleImage.alt's length
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,79}\.(png|jpg|gif|webp)$")
LESSON_PREFIX = "images/"
IMG_RE = re.compile(r"<img\b[^>]*>", re.I)
ATTR_RE = re.compile(r'\b(src|alt)="([^"]*)"', re.I)


@dataclass(frozen=True)
class ImageKind:
    extension: str
    content_type: str


KINDS = {"png": ImageKind("png", "image/png"), "jpg": ImageKind("jpg", "image/jpeg"),
         "gif": ImageKind("gif", "image/gif"), "webp": ImageKind("webp", "image/webp")}


def kind_of(data: bytes) -> ImageKind | None:
    """The image format of `data`, from its first bytes; None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return KINDS["png"]
    if data.startswith(b"\xff\xd8\xff"):
        return KINDS["jpg"]
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return KINDS["gif"]
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return KINDS["webp"]
    return None


def lesson_name(uploaded: str, kind: ImageKind) -> str:
    """The name a lesson uses for an upload: lowercase, hyphens, the extension of what it really is."""
    stem = re.sub(r"[^a-z0-9]+", "-", Path(uploaded).stem.lower()).strip("-")[:70] or "image"
    return f"{stem}.{kind.extension}"


def check(data: bytes, alt: str) -> ImageKind:
    """The kind of an acceptable upload; ValueError (the message says what to do) otherwise."""
    if not alt.strip():
        raise ValueError("Describe the image in its alt text: students using a screen reader hear it instead.")
    if len(alt.strip()) > MAX_ALT_CHARS:
        raise ValueError(f"The alt text is {len(alt.strip())} characters long; keep it under {MAX_ALT_CHARS} (a "
                         "long description belongs in the lesson's text).")
    if len(data) > MAX_IMAGE_BYTES:
        raise ValueError(f"The image is {len(data) / 1_048_576:.1f} MiB; at most "
                         f"{MAX_IMAGE_BYTES / 1_048_576:.0f} MiB are accepted.")
    kind = kind_of(data)
    if kind is None:
        raise ValueError("Not a PNG, JPEG, GIF or WebP image (SVG is not accepted).")
    return kind


def file_path(image: ModuleImage) -> Path:
    return Path(settings.MEDIA_ROOT) / IMAGE_DIR / f"{image.digest}.{image.extension}"


def store(module: Module, name: str, data: bytes, alt: str) -> ModuleImage:
    """Keep `data` as the module's image `name` (replacing one of that name), with its alt text."""
    kind = check(data, alt)
    if not NAME_RE.match(name):
        raise ValueError(f"'{name}' is not an image name: lowercase letters, digits, '-' and '_', then "
                         ".png, .jpg, .gif or .webp.")
    digest = hashlib.sha256(data).hexdigest()
    directory = Path(settings.MEDIA_ROOT) / IMAGE_DIR
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{digest}.{kind.extension}"
    if not target.exists():
        partial = target.with_suffix(".part")
        partial.write_bytes(data)
        partial.replace(target)
    image, _ = ModuleImage.objects.update_or_create(module=module, name=name, defaults={
        "alt": alt.strip(), "digest": digest, "extension": kind.extension, "size": len(data)})
    return image


def warnings(html: str, names: set[str]) -> list[str]:
    """What is wrong with the images of a rendered lesson: external, missing (not among the module's
    uploaded `names`), or without alt text. One sentence each, naming the image."""
    found = []
    for tag in IMG_RE.findall(html):
        attrs = {key.lower(): value for key, value in ATTR_RE.findall(tag)}
        src, alt = attrs.get("src", ""), attrs.get("alt", "")
        if re.match(r"^(?:[a-z][a-z0-9+.-]*:|//)", src, re.I):
            found.append(f"The image {src} is on another site: it may change or disappear, and students' "
                         "browsers fetch it from there. Upload it to this module instead.")
        elif not src.startswith(LESSON_PREFIX) or src[len(LESSON_PREFIX):] not in names:
            found.append(f"The image {src or '(no address)'} is missing: upload it to this module, then write "
                         f"![description]({LESSON_PREFIX}NAME).")
        if not alt.strip():
            found.append(f"The image {src or '(no address)'} has no alt text: write what it shows between the "
                         "brackets of ![…](…), for students who cannot see it.")
    return found
