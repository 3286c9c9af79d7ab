"""Hand a media file the application has cleared to the web server in front (nginx's `X-Accel-Redirect`).

Who may fetch a narration or a lesson image depends on its module (a draft's only to instructors), so a web
server must never serve MEDIA_ROOT by itself: the application decides, and with `MEDIA_ACCEL_REDIRECT` set (the
prefix of an `internal` nginx location aliased to MEDIA_ROOT, docs/deploy.md) it answers an empty response
naming the file, and nginx sends the bytes, with Range requests, sendfile and without holding a Daphne worker
for the length of a download. Without it (`make run`, tests) the view streams the file itself.
"""
from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.http import HttpResponse

ACCEL_HEADER = "X-Accel-Redirect"


def accel_response(path: Path, content_type: str) -> HttpResponse | None:
    """An empty response telling nginx to serve `path` (a file under MEDIA_ROOT) from its internal location;
    None when no such location is configured, or the file lies outside MEDIA_ROOT (never named to nginx)."""
    prefix = settings.MEDIA_ACCEL_REDIRECT
    if not prefix:
        return None
    try:
        relative = Path(path).resolve().relative_to(Path(settings.MEDIA_ROOT).resolve())
    except ValueError:
        return None
    response = HttpResponse(content_type=content_type)
    # Percent-encoded: nginx decodes the URI of an X-Accel-Redirect before it maps it onto its alias.
    response[ACCEL_HEADER] = prefix.rstrip("/") + "/" + quote(relative.as_posix(), safe="/")
    return response
