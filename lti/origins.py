"""Origins (`scheme://host[:port]`): read from a URL, and the list an `Embedding` keeps, one per line.

A leaf module (no models): the `Embedding.origins` field validates with `parse_origins`, and the framing
middleware reads the same lists.
"""
from __future__ import annotations

import re
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

ORIGIN_RE = re.compile(r"^https?://(?:[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\])(?::[0-9]{1,5})?$")


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of an http(s) URL, or "" when it has none (or a host no CSP source can name:
    what this returns goes into a header, so nothing but letters, digits, '.', '-' and a port gets through)."""
    try:
        parts = urlsplit(str(url).strip())
    except ValueError:
        return ""
    origin = f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}".lower()
    return origin if ORIGIN_RE.match(origin) else ""


def parse_origins(text: str) -> list[str]:
    """The origins of an `Embedding`, one per line; ValidationError naming the first line that is not one."""
    found = []
    for number, line in enumerate(str(text or "").splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        origin = origin_of(line)
        if not origin or origin != line.rstrip("/").lower():
            raise ValidationError(f"Line {number}, “{line}”, is not an origin: write scheme://host[:port], "
                                  "with no path (e.g. https://school.instructure.com).")
        found.append(origin)
    return found
