"""The Content-Security-Policy in a real browser: the course's pages (Plotly charts, demo embeds, the
narration player) work under it, and an uploaded cue file full of script is inert."""
from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from courseapp.models import Module
from narration.models import Narration
from narration.jobs import attach_upload

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def test_lesson_with_demo_and_calculator_runs_under_the_csp(real_course, csp_page, csp_violations):
    page = csp_page
    violations = csp_violations
    response = page.goto(f"{real_course}/modules/kv-cache/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector(".ilab-demo button", timeout=20_000)  # mounted by the static loader, no inline script
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=20_000)  # a Plotly chart drew
    page.goto(f"{real_course}/demos/kv-cache/")
    page.wait_for_selector(".ilab-demo button", timeout=20_000)
    assert not violations, violations
    assert not page.errors, page.errors


def test_uploaded_cue_file_with_script_is_inert(real_course, csp_page):
    module = Module.objects.get(slug="kv-cache")
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x80>\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00"
    evil = b"WEBVTT\n\nc1\n00:00:00.000 --> 00:00:01.000\n<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">\n"
    attach_upload(module, SimpleUploadedFile("evil.html", wav), ".wav", SimpleUploadedFile("evil.html", evil), 1.0)
    url = Narration.objects.get(module=module).vtt_url
    assert url.endswith(".vtt")
    page = csp_page
    response = page.goto(f"{real_course}{url}")
    assert response.headers["content-type"].startswith("text/vtt")
    assert response.headers["x-content-type-options"] == "nosniff"
    page.wait_for_timeout(300)
    assert page.title() != "pwned" and page.evaluate("document.querySelector('script') === null")
