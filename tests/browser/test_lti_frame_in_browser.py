"""A lesson inside the LMS's iframe, in Chromium (issue 28): the simulated platform's course page (another origin)
frames the tool's OIDC login; the platform's authorization page posts a real signed id_token; the lesson renders
in the frame, signed in. The same session's lesson framed by an unregistered origin is refused by the browser,
and so is a lesson framed by the platform for a browser that never launched. Where the browser will not keep the
tool's cookies in the frame (a cross-site frame over plain HTTP), the frame says so and its "Open in a new tab"
lands the student on the lesson, signed in."""
from __future__ import annotations

import sys
import uuid
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

import pytest
from django.core.management import call_command

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lti"))
from lti_platform import LEARNER, Platform  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

SLUG = "kv-cache"
LESSON = "The KV cache"


@pytest.fixture
def lms(real_course):
    """The simulated platform, registered with the tool, whose browser pages are served as `localhost` (same
    site as the tool's live server) and as `127.0.0.1` (another site); an unregistered page server beside it."""
    platform, stranger = Platform(), Platform()
    port = urlsplit(platform.base).port
    platform.page = f"http://localhost:{port}"
    platform.other_site = f"http://127.0.0.1:{port}"
    call_command("lti_add_platform", title="Browser LMS", issuer=platform.issuer, client_id=platform.client_id,
                 login_url=f"{platform.page}/auth", token_url=platform.token_url, jwks_url=platform.jwks_url,
                 deployment=[platform.deployment_id], frame_origin=[platform.other_site])
    platform.tool = real_course
    stranger.page = f"http://localhost:{urlsplit(stranger.base).port}"
    platform.stranger = stranger
    yield platform
    platform.close()
    stranger.close()


def launch_url(lms, sub: str) -> str:
    """The tool's login initiation, as the LMS's link starts it for `sub`."""
    hint = f"hint-{uuid.uuid4().hex}"
    lms.claims_for[hint] = lms.resource_claims(sub, LEARNER, module=SLUG)
    return f"{lms.tool}/lti/login/?" + urlencode({
        "iss": lms.issuer, "client_id": lms.client_id, "login_hint": hint, "lti_deployment_id": lms.deployment_id,
        "target_link_uri": f"{lms.tool}/modules/{SLUG}/"})


def framing(base: str, src: str) -> str:
    return f"{base}/frame?src={quote(src, safe='')}"


def console_of(page) -> list[str]:
    messages: list[str] = []
    page.on("console", lambda msg: messages.append(msg.text))
    return messages


def refused_frame(page, messages: list[str]) -> None:
    """The browser refused to show the framed page (its CSP or X-Frame-Options): no lesson in the frame."""
    page.wait_for_load_state("load")
    page.wait_for_timeout(500)
    frame = page.frame_locator("#tool")
    assert frame.locator("h1", has_text=LESSON).count() == 0
    assert any("frame" in m and ("ancestor" in m or "X-Frame-Options" in m) for m in messages), messages


def test_a_launched_lesson_renders_in_the_lms_frame_and_nowhere_else(lms, chromium):
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    messages = console_of(page)
    try:
        page.goto(framing(lms.page, launch_url(lms, "stu-browser")))
        frame = page.frame_locator("#tool")
        frame.locator("h1", has_text=LESSON).wait_for(timeout=30_000)
        assert frame.locator(".account-name").inner_text().startswith("Signed in as lti-")
        tool_frame = next(f for f in page.frames if f.url.startswith(lms.tool))
        assert tool_frame.url == f"{lms.tool}/modules/{SLUG}/"

        # The same browser, the same signed-in session: an origin the platform did not register is refused.
        page.goto(framing(lms.stranger.page, f"{lms.tool}/modules/{SLUG}/"))
        refused_frame(page, messages)
    finally:
        context.close()


def test_a_browser_that_never_launched_cannot_be_framed_even_by_the_lms(lms, chromium):
    context = chromium.new_context()
    page = context.new_page()
    messages = console_of(page)
    try:
        page.goto(framing(lms.page, f"{lms.tool}/modules/{SLUG}/"))
        refused_frame(page, messages)
    finally:
        context.close()


def test_refused_cookies_in_the_frame_offer_a_new_tab_that_lands_signed_in(lms, chromium):
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        page.goto(framing(lms.other_site, launch_url(lms, "stu-blocked")))  # a cross-site frame: no cookies
        frame = page.frame_locator("#tool")
        button = frame.get_by_role("link", name="Open in a new tab")
        button.wait_for(timeout=30_000)
        assert "cookies inside the LMS" in frame.locator("[role=alert]").inner_text()
        with context.expect_page() as opened:
            button.click()
        tab = opened.value
        tab.wait_for_url(f"{lms.tool}/modules/{SLUG}/", timeout=30_000)
        assert tab.locator("h1", has_text=LESSON).count() == 1
        assert tab.locator(".account-name").inner_text().startswith("Signed in as lti-")
    finally:
        context.close()
