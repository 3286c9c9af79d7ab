"""Who owns a run: one string for a user, a session, or (without a session) a single connection."""
from __future__ import annotations

import uuid


def owner_for_request(request) -> str:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return f"u:{user.pk}"
    return f"s:{request.session.session_key}"


def owner_for_scope(scope) -> str:
    user = scope.get("user")
    if user is not None and getattr(user, "is_authenticated", False):
        return f"u:{user.pk}"
    session = scope.get("session")
    key = getattr(session, "session_key", None) if session is not None else None
    if key:
        return f"s:{key}"
    # No session cookie: the connection is its own owner (runs can't be resumed from elsewhere).
    return f"c:{uuid.uuid4().hex}"
