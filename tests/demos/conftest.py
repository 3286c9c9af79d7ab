"""Integration fixtures: real Redis + a real Celery worker (real engine) for the whole session."""
from __future__ import annotations

import pytest
from django.conf import settings

from demo_stack import Stack, point_test_process_at




def test_db_path() -> str:
    return str(settings.DATABASES["default"]["TEST"]["NAME"])


@pytest.fixture(scope="session")
def demo_stack(django_db_setup, tmp_path_factory):
    """Redis on a free port and one worker, pointed at the file-based test database."""
    # A closed socket's run is cancelled 2 s after it went away (15 s by default).
    stack = Stack(tmp_path_factory.mktemp("demo-stack"), test_db_path(), {"DEMO_ORPHAN_GRACE": "2"})
    try:
        stack.start_redis()
        point_test_process_at(stack.redis_url)
        stack.start_worker()
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def fast_watchdog(settings):
    """The consumer checks a quiet run after 1.5 s (the stack's worker heartbeat expires after 3 s)."""
    settings.DEMO_STALL_SECONDS = 1.5


@pytest.fixture
def session_cookie(transactional_db):
    """A saved Django session: (header, owner) for a websocket that identifies as that visitor."""
    from django.contrib.sessions.backends.db import SessionStore

    from demos.identity import TOKEN_KEY, ensure_token, token_owner

    s = SessionStore()
    ensure_token(s)
    s.save()
    return (b"cookie", f"{settings.SESSION_COOKIE_NAME}={s.session_key}".encode()), token_owner(s[TOKEN_KEY])
