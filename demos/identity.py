"""Who owns a run: a user, an anonymous visitor's session, or (without a session) the client address.

Anonymous visitors are identified by a random token kept in their session, never by the session key:
the key changes at login (Django cycles it) and must not be stored where staff can read it. The owner string
is a keyed hash of the token, so a run started before logging in is still the visitor's after it (the token
survives the key change; `owners_*` return both the user's and the token's owner), and `Run.owner` holds
nothing that would let anyone take over the session.

A websocket without a session cookie belongs to its client address (inferencelab/client_address.py): every
cookie-less connection from one address is one owner, so opening more sockets never earns more runs.
"""
from __future__ import annotations

import secrets

from django.utils.crypto import salted_hmac

TOKEN_KEY = "demo_owner"


def token_owner(token: str) -> str:
    return "s:" + salted_hmac("demos.identity.owner", token).hexdigest()[:32]


def ensure_token(session) -> str:
    """The session's owner token, created on first use (the session is saved by the caller's middleware)."""
    token = session.get(TOKEN_KEY)
    if not isinstance(token, str) or not token:
        token = session[TOKEN_KEY] = secrets.token_urlsafe(24)
    return token


def _owners(user, session) -> tuple[str, ...]:
    token = session.get(TOKEN_KEY) if session is not None else None
    anonymous = (token_owner(token),) if isinstance(token, str) and token else ()
    if user is not None and getattr(user, "is_authenticated", False):
        return (f"u:{user.pk}", *anonymous)
    return anonymous


def owners_for_request(request) -> tuple[str, ...]:
    """Every owner string this visitor's runs may carry; the first is the one new runs get."""
    if not (user := getattr(request, "user", None)) or not user.is_authenticated:
        ensure_token(request.session)
    return _owners(getattr(request, "user", None), request.session)


def address_owner(address: str) -> str:
    """The owner of every cookie-less connection from `address` (keyed, like token owners)."""
    return "a:" + salted_hmac("demos.identity.address", address).hexdigest()[:32]


def owners_for_scope(scope, address: str) -> tuple[str, ...]:
    """As `owners_for_request`, for a websocket from client `address` (reads, and may save, the session: call
    from a thread)."""
    user, session = scope.get("user"), scope.get("session")
    if session is not None and getattr(session, "session_key", None):
        if not (user is not None and getattr(user, "is_authenticated", False)) and not session.get(TOKEN_KEY):
            ensure_token(session)
            session.save()  # the page made the session; the socket cannot set cookies, only fill it
        owners = _owners(user, session)
        if owners:
            return owners
    if user is not None and getattr(user, "is_authenticated", False):
        return (f"u:{user.pk}",)
    # No session cookie: the address is the owner (a new connection is not a new visitor).
    return (address_owner(address),)
