"""Who may send a large body: decided from the session cookie alone, before the server reads a byte of it.

The upload paths (settings.UPLOAD_BODY_PATHS) accept bodies up to UPLOAD_MAX_BODY_BYTES, but only from a
signed-in user with settings.UPLOAD_BODY_PERMISSION (the instructors). inferencelab/server.py asks
`may_send_large_body` once a request's headers are in and holds the body back until the answer: anyone else
gets a 403 without the server reading (or Daphne buffering) the 200 MiB first. Bodies within the ordinary cap
are not asked about: the view answers them as usual (a login redirect, a 403, a form error).

Any failure to decide (no cookie, an unknown or expired session, a database error) is a refusal.
"""
from __future__ import annotations

import logging
from importlib import import_module
from types import SimpleNamespace

from django.conf import settings
from django.contrib.auth import get_user
from django.db import close_old_connections

log = logging.getLogger(__name__)


def may_send_large_body(session_key: str | None) -> bool:
    """Whether the session `session_key` names is a signed-in user with the upload permission. Blocking
    (database): call from a thread, never from the event loop."""
    if not session_key:
        return False
    close_old_connections()
    try:
        session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
        user = get_user(SimpleNamespace(session=session))  # checks the session's password hash, as a request would
        return bool(user.is_authenticated and user.is_active and user.has_perm(settings.UPLOAD_BODY_PERMISSION))
    except Exception:  # noqa: BLE001 - undecided is refused; the client may sign in and send again
        log.exception("could not check an upload's session")
        return False
    finally:
        close_old_connections()
