"""Fixtures the browser tests share: the real course loaded behind a live server, CSP violations on a page."""
from __future__ import annotations

import pytest
from django.conf import settings

from courseapp.loader import load_course


@pytest.fixture
def real_course(transactional_db, live_server):
    """The course from content/ in the database; the live server's URL."""
    load_course(settings.CONTENT_DIR)
    return live_server.url


@pytest.fixture
def csp_violations(csp_page) -> list[str]:
    """The Content-Security-Policy violations `csp_page` reports on its console, from now on."""
    violations: list[str] = []
    csp_page.on("console", lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None)
    return violations
