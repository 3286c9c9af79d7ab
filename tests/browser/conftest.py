"""Fixtures the browser tests share: the real course loaded behind a live server, a demo page that records errors, recorded demo runs with a page that replays them, CSP violations on a page."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from django.conf import settings

from courseapp.loader import load_course

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "demos"))
from stand_in import record_runs, stand_in_page  # noqa: E402  (this folder: pytest puts it on the path)


@pytest.fixture(scope="session")
def recorded_runs(loaded_models) -> dict[str, list[dict]]:
    """Each demo's events from one small run of its real runner, recorded once per test session."""
    return record_runs(loaded_models)


@pytest.fixture
def stand_in(chromium, recorded_runs):
    """A desktop page whose demo socket replays `recorded_runs` (stand_in.py); `.server` is the stand-in and
    `.errors` the page's uncaught exceptions and console errors."""
    context, page, server = stand_in_page(chromium, recorded_runs, viewport={"width": 1280, "height": 900})
    page.server = server
    yield page
    context.close()


@pytest.fixture
def demo_page(chromium):
    """A page that records uncaught exceptions and console errors (a demo handler's exception is logged,
    not thrown; a CSP violation is a console error too)."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)  # wait_for_function evals
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.on("console", lambda msg: msg.type == "error" and page.errors.append(msg.text))
    yield page
    context.close()


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
