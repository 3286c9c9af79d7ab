"""The secret key: from DJANGO_SECRET_KEY, else this install's own key file (created by `make`).

`python -m inferencelab.secret_key` creates `var/secret_key` (random, mode 0600) once; `make run` and
`make test` call it, so a fresh checkout works with no manual step and no two installs share a key.
A server started any other way with neither the variable nor the file refuses to start, with a message
that says what to do: a public default key would let anyone forge sessions and password-reset links.
"""
from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

KEY_FILE = Path(__file__).resolve().parent.parent / "var" / "secret_key"


def secret_key(path: Path = KEY_FILE, configured: str = "") -> str:
    """`configured` (DJANGO_SECRET_KEY, as settings.py read it) when set, else the key file's key."""
    configured = configured.strip()
    if configured:
        return configured
    try:
        key = path.read_text().strip()
    except FileNotFoundError:
        key = ""
    if not key:
        raise ImproperlyConfigured(
            f"No secret key: set DJANGO_SECRET_KEY, or create this install's key file {path} with "
            "`python -m inferencelab.secret_key` (`make run` and `make test` do it for you).")
    return key


def ensure_key_file(path: Path = KEY_FILE) -> bool:
    """Create the key file if it is missing; True when a new key was written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(50) + "\n")
    return True


if __name__ == "__main__":
    created = ensure_key_file(Path(sys.argv[1]) if len(sys.argv) > 1 else KEY_FILE)
    print(f"{'created' if created else 'kept'} {sys.argv[1] if len(sys.argv) > 1 else KEY_FILE}")
