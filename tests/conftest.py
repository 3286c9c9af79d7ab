"""Fixtures shared by every test package: a headless Chromium page driven by Playwright."""
from __future__ import annotations

import os
import shutil

# Before anything loads torch (see inference_core/__main__.py): passive OpenMP waiting keeps the test
# process, the Celery worker it starts and Chromium from starving each other on two cores.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")


@pytest.fixture(scope="module")
def live_stack(django_db_setup, tmp_path_factory, request):
    """Real Redis, one Celery worker (the real engine) and Daphne on free ports, for one test module, on the test
    database; `.url` is Daphne's, `.log(.worker)` the worker's log. The one definition (tests/workers checks it)."""
    import sys
    from pathlib import Path

    from django.conf import settings

    sys.path.insert(0, str(Path(__file__).resolve().parent / "demos"))
    from demo_stack import Stack

    name = request.module.__name__.rpartition(".")[2]
    stack = Stack(tmp_path_factory.mktemp(f"{name}-stack"), str(settings.DATABASES["default"]["TEST"]["NAME"]))
    stack.worker = f"{name}-worker"
    try:
        stack.start_redis()
        stack.start_worker(name=stack.worker)
        stack.url = stack.start_daphne()
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="session")
def loaded_models():
    """The test session's loaded models and batching services, as a worker keeps its own: a demo runner given them
    (`run(params, models=loaded_models)`) loads each model once per session, not once per call."""
    from workers.serving import LoadedModels

    return LoadedModels()
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--autoplay-policy=no-user-gesture-required",
]


@pytest.fixture(scope="session")
def chromium():
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium not found at {CHROMIUM}: `make test` installs it (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        yield browser
        browser.close()


def _page(chromium, **options):
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, **options)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    return context, page


@pytest.fixture
def browser_page(chromium):
    """A fresh browser context (own cookies) and page; console errors are collected on `page.errors`.

    The site's Content-Security-Policy forbids eval, which Playwright's `wait_for_function` polling needs, so
    this page bypasses it; `csp_page` keeps it (tests/browser/test_csp.py proves the pages work under it)."""
    context, page = _page(chromium, bypass_csp=True)
    yield page
    context.close()


@pytest.fixture
def csp_page(chromium):
    """As `browser_page`, with the site's CSP enforced (no `wait_for_function` on it: use selectors)."""
    context, page = _page(chromium)
    yield page
    context.close()


def pytest_collection_modifyitems(config, items):
    """Browser tests run last: once Playwright's sync API starts (session-scoped `chromium`), an event
    loop stays running in the main thread, and async tests collected after it could not run."""

    def is_browser(item) -> bool:  # marked, in tests/browser/, or using Chromium through any fixture
        return (item.get_closest_marker("browser") is not None or "tests/browser/" in str(item.path)
                or "chromium" in getattr(item, "fixturenames", ()))

    items.sort(key=is_browser)  # stable: keeps the order within each group


def pytest_sessionfinish(session):
    """Django deletes the file-based test database but not SQLite's WAL and shared-memory files beside it,
    which the worker processes kept open: remove them once the database itself is gone."""
    from django.conf import settings

    name = settings.DATABASES["default"].get("TEST", {}).get("NAME") if settings.configured else None
    if not name or os.path.exists(name):
        return
    for suffix in ("-wal", "-shm"):
        try:
            os.remove(name + suffix)
        except FileNotFoundError:
            pass
