"""Serve narration media with HTTP Range support, safely.

Browsers need byte ranges to seek in audio (Chrome resets `currentTime` to 0 without them), and neither
`django.views.static.serve` nor Django's `FileResponse` answers ranges. Narration files are therefore
linked through this view (`Narration.audio_url`, `/narration/...`), whatever serves MEDIA_URL.

Invariants: only files a `Narration` row points at are served, with a content type from
`files.SERVED_TYPES` (never guessed from an uploaded name); a draft module's narration only to
instructors; a range answer is at most `MAX_CHUNK` bytes and streamed from disk, however large the range
asked for (the browser asks again for the rest, as it does for open-ended ranges). With MEDIA_ACCEL_REDIRECT set,
the view only decides and nginx sends the file (`inferencelab.media_accel`).
"""
from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.db.models import Q
from django.http import FileResponse, Http404, HttpResponse, StreamingHttpResponse
from django.utils._os import safe_join
from django.views.decorators.http import require_safe

from courseapp.input_limits import MAX_DIGITS, parse_digits
from inferencelab.media_accel import accel_response

from .files import SERVED_TYPES
from .models import Narration
from .synthesis import NARRATION_DIR

MAX_CHUNK = 8 * 1024 * 1024
READ_SIZE = 64 * 1024
RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")
INSTRUCTOR_PERMISSION = "courseapp.instructor"
BEYOND_ANY_FILE = 10**MAX_DIGITS


def _visible(request, name: str) -> bool:
    """Whether this file belongs to a narration this visitor may hear (any published module, or instructor)."""
    modules = Narration.objects.filter(Q(audio=name) | Q(vtt=name)).values_list("module__draft", flat=True)
    drafts = list(modules)
    if not drafts:
        return False
    return not all(drafts) or request.user.has_perm(INSTRUCTOR_PERMISSION)


def _stream(path: Path, start: int, length: int):
    with path.open("rb") as handle:
        handle.seek(start)
        while length > 0:
            chunk = handle.read(min(READ_SIZE, length))
            if not chunk:
                return
            length -= len(chunk)
            yield chunk


def _offset(digits: str) -> int:
    """A byte position from the header; past `MAX_DIGITS` digits it is past any file, so it is never parsed
    (int() of 4,300+ digits raises, and of fewer costs quadratic time for nothing)."""
    value = parse_digits(digits)
    return BEYOND_ANY_FILE if value is None else value


def byte_range(header: str, size: int) -> tuple[int, int] | None:
    """(start, end) inclusive for a single `bytes=` range, clamped to the file and to MAX_CHUNK bytes;
    None when the header asks for no single range (absent, malformed or several ranges: the whole file
    is answered); (size, size) when it is unsatisfiable."""
    match = RANGE_RE.match(header.strip())
    if not match or (not match[1] and not match[2]):
        return None
    if match[1]:
        start = _offset(match[1])
        end = _offset(match[2]) if match[2] else size - 1
    else:  # suffix range: the last N bytes
        start, end = max(0, size - _offset(match[2])), size - 1
    if start >= size or start > end:
        return size, size
    return start, min(end, size - 1, start + MAX_CHUNK - 1)


@require_safe
def narration_media(request, path: str):
    try:
        full = Path(safe_join(settings.MEDIA_ROOT / NARRATION_DIR, path))
    except Exception:  # SuspiciousFileOperation for paths escaping the directory
        raise Http404("No such narration file") from None
    content_type = SERVED_TYPES.get(full.suffix.lower())
    if content_type is None or not full.is_file() or not _visible(request, f"{NARRATION_DIR}/{path}"):
        raise Http404("No such narration file")
    response = accel_response(full, content_type)  # behind nginx: it sends the bytes and answers the ranges
    if response is not None:
        response["Content-Disposition"] = "inline"
        return response
    size = full.stat().st_size
    span = byte_range(request.headers.get("Range", ""), size)
    if span is None:
        response = FileResponse(full.open("rb"), content_type=content_type)
    elif span[0] >= size:
        response = HttpResponse(status=416)
        response["Content-Range"] = f"bytes */{size}"
    else:
        start, end = span
        response = StreamingHttpResponse(_stream(full, start, end - start + 1), status=206, content_type=content_type)
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
        response["Content-Length"] = str(end - start + 1)
    response["Accept-Ranges"] = "bytes"
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Disposition"] = "inline"
    return response
