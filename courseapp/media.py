"""Serve narration media with HTTP Range support.

Browsers need byte ranges to seek in audio (Chrome resets `currentTime` to 0 without them), and neither
`django.views.static.serve` nor Django's `FileResponse` answers ranges. Narration files are therefore
linked through this view (`Narration.audio_url`, `/narration/...`), whatever serves MEDIA_URL.
"""
from __future__ import annotations

import mimetypes
import re
from pathlib import Path

from django.conf import settings
from django.http import FileResponse, Http404, HttpResponse
from django.utils._os import safe_join
from django.views.decorators.http import require_safe

from .narration import NARRATION_DIR

MAX_CHUNK = 8 * 1024 * 1024  # an open-ended range is answered in pieces the browser asks again for
RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")
mimetypes.add_type("text/vtt", ".vtt")


@require_safe
def narration_media(request, path: str):
    try:
        full = Path(safe_join(settings.MEDIA_ROOT / NARRATION_DIR, path))
    except Exception:  # SuspiciousFileOperation for paths escaping the directory
        raise Http404("No such narration file") from None
    if not full.is_file():
        raise Http404("No such narration file")
    size = full.stat().st_size
    content_type = mimetypes.guess_type(full.name)[0] or "application/octet-stream"
    if content_type.startswith("text/"):
        content_type += "; charset=utf-8"
    match = RANGE_RE.match(request.headers.get("Range", "").strip())
    if not match or (not match[1] and not match[2]):
        response = FileResponse(full.open("rb"), content_type=content_type)
        response["Accept-Ranges"] = "bytes"
        return response
    if match[1]:
        start = int(match[1])
        end = min(int(match[2]), size - 1) if match[2] else min(size - 1, start + MAX_CHUNK - 1)
    else:  # suffix range: the last N bytes
        start, end = max(0, size - int(match[2])), size - 1
    if start >= size or start > end:
        response = HttpResponse(status=416)
        response["Content-Range"] = f"bytes */{size}"
        return response
    with full.open("rb") as handle:
        handle.seek(start)
        data = handle.read(end - start + 1)
    response = HttpResponse(data, status=206, content_type=content_type)
    response["Content-Range"] = f"bytes {start}-{end}/{size}"
    response["Accept-Ranges"] = "bytes"
    response["Content-Length"] = str(len(data))
    return response
