"""The exercise page in Chromium under the site's CSP: the vendored CodeMirror editor replaces the text area (line
numbers, labelled), "Run tests" goes through Daphne, Redis and a `cpu` worker, and the results table fills in."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from django.conf import settings

from exercises import catalog

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "demos"))
from demo_stack import Stack  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def exercise_stack(django_db_setup, tmp_path_factory):
    stack = Stack(tmp_path_factory.mktemp("exercise-stack"), str(settings.DATABASES["default"]["TEST"]["NAME"]))
    try:
        stack.start_redis()
        stack._spawn("cpu-worker", [sys.executable, "-m", "celery", "-A", "inferencelab", "worker", "-P", "threads",
                                    "-Q", "cpu", "-c", "2", "--without-gossip", "--without-mingle"])
        stack.url = stack.start_daphne()
        yield stack
    finally:
        stack.stop()


@pytest.mark.django_db(transaction=True)
def test_edit_and_run_tests_in_the_browser(exercise_stack, csp_page, sandbox_ready):
    page, kv = csp_page, catalog.get("kv-cache-bytes")
    errors: list[str] = []
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.goto(f"{exercise_stack.url}/exercises/{kv.id}/")
    page.wait_for_selector("section.exercise[data-ready] .cm-editor .cm-lineNumbers")
    assert page.locator("textarea.exercise-code").is_hidden()
    content = page.locator(".cm-content")
    assert content.get_attribute("aria-labelledby") == "exercise-kv-cache-bytes-label"
    assert "num_attention_heads" in content.inner_text()  # the starter code, highlighted
    page.click("button.exercise-run")
    page.wait_for_selector(".exercise-table tbody tr >> nth=10", timeout=60_000)
    assert page.locator(".exercise-summary").inner_text().startswith("1 of 11 tests pass")
    first = page.locator(".exercise-table tbody tr").first
    assert "✗ Failed" in first.inner_text() and "262144" in first.inner_text()
    content.click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(kv.reference)
    page.click("button.exercise-run")
    page.wait_for_selector(".exercise-summary.is-pass", timeout=60_000)
    assert page.locator(".exercise-status").inner_text() == "Done: 11 of 11 tests pass."
    hidden_row = page.locator(".exercise-table tbody tr").last
    assert hidden_row.locator(".is-hidden-value").count() == 3
    page.click("button.exercise-reset")
    assert "What many course pages write" in content.inner_text()
    assert errors == [] and page.errors == []
