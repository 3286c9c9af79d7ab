"""API keys from the account page in Chromium under the site's CSP (made, shown once, revoked), and from
`manage.py create_api_key`; the page passes axe's WCAG A/AA checks."""
from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from openai_api.keys import MAX_ACTIVE_KEYS, key_for

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

AXE = Path(__file__).resolve().parents[1] / "browser" / "vendor" / "axe.min.js"
AXE_RUN = """() => axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21aa', 'wcag22aa']},
  resultTypes: ['violations']}).then((r) => r.violations.filter((v) => ['serious', 'critical'].includes(v.impact))
  .map((v) => v.id + ': ' + v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ')))"""


def log_in(page, base: str) -> None:
    page.goto(f"{base}/accounts/login/?next=/")
    page.get_by_label("Username").fill("reader")
    page.get_by_label("Password").fill("reader-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/")


def test_a_key_is_made_shown_once_and_revoked_on_the_account_page(transactional_db, live_server, csp_page, chromium):
    base, page = live_server.url, csp_page
    csp_violations: list[str] = []
    page.on("console", lambda msg: csp_violations.append(msg.text) if "Content Security Policy" in msg.text else None)
    User.objects.create_user("reader", password="reader-pass-123")
    page.goto(f"{base}/account/api-keys/")
    assert "/accounts/login/" in page.url  # only a signed-in person has keys
    log_in(page, base)
    page.get_by_role("link", name="API keys").click()
    page.get_by_role("heading", name="API keys", level=1).wait_for()
    assert page.get_by_text("You have no API key yet.").is_visible()
    page.get_by_label("Name (optional)").fill("my notebook")
    page.get_by_role("button", name="Create a key").click()
    raw = page.get_by_label("Key", exact=True).input_value()
    assert raw.startswith("il-") and len(raw) > 40
    key = key_for(raw)
    assert key is not None and key.user.username == "reader" and key.name == "my notebook"
    row = page.get_by_role("row").filter(has_text="my notebook")
    assert key.prefix in row.inner_text() and raw not in row.inner_text()
    page.reload()  # shown once: the page never shows it again, and a reload makes no other key
    assert raw not in page.content() and page.get_by_role("row").count() == 2

    context = chromium.new_context(bypass_csp=True)  # axe is an injected script, which the CSP refuses
    try:
        checker = context.new_page()
        log_in(checker, base)
        checker.goto(f"{base}/account/api-keys/")
        checker.add_script_tag(path=str(AXE))
        assert checker.evaluate(AXE_RUN) == []
    finally:
        context.close()

    page.get_by_role("button", name=f"Revoke key {key.prefix}").click()
    page.get_by_text("The key is revoked").wait_for()
    assert key_for(raw) is None and page.get_by_text("You have no API key yet.").is_visible()
    assert csp_violations == []


def test_the_management_command_prints_a_working_key(transactional_db):
    user = User.objects.create_user("script-user")
    out = StringIO()
    call_command("create_api_key", "script-user", "--name", "cron", stdout=out)
    key = key_for(out.getvalue().strip())
    assert key is not None and key.user == user and key.name == "cron"
    with pytest.raises(CommandError, match="no account named 'nobody'"):
        call_command("create_api_key", "nobody")
    for _ in range(MAX_ACTIVE_KEYS - 1):
        call_command("create_api_key", "script-user", stdout=StringIO())
    with pytest.raises(CommandError, match=f"at most {MAX_ACTIVE_KEYS} active keys"):
        call_command("create_api_key", "script-user")
    user.is_active = False
    user.save()
    assert key_for(out.getvalue().strip()) is None  # an inactive account's keys stop working
