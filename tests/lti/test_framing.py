"""Lessons inside the LMS's frame (issue 28): a session an LTI launch began may be framed by the launching
platform's registered origins only; everything else keeps DENY / 'none'; cross-site cookies only where a frame
needs them; a browser refusing third-party cookies gets the login again in a tab of its own."""
from __future__ import annotations

import html as html_lib
import re
import time
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from lti_platform import LEARNER, login_and_nonce

from classes.models import Cohort
from lti import login_again
from lti.models import Embedding, Identity

SCHOOL = "https://school.instructure.com"
IN_FRAME = {"HTTP_SEC_FETCH_DEST": "iframe"}
IN_TAB = {"HTTP_SEC_FETCH_DEST": "document"}


def directives(response) -> dict[str, str]:
    policy = response["Content-Security-Policy"]
    return {d.split()[0]: d.strip() for d in policy.split(";") if d.strip()}


def refuses_framing(response) -> bool:
    return (response["X-Frame-Options"] == "DENY"
            and directives(response)["frame-ancestors"] == "frame-ancestors 'none'")


def register_frame_origins(platform, *origins: str) -> None:
    call_command("lti_add_platform", title="Test LMS", issuer=platform.issuer, client_id=platform.client_id,
                 login_url=platform.login_url, token_url=platform.token_url, jwks_url=platform.jwks_url,
                 deployment=[platform.deployment_id], frame_origin=list(origins))


def framed_launch(client, platform, sub: str, *, secure: bool = False, headers: dict | None = None):
    redirect_uri, state, nonce = login_and_nonce(client, platform, secure=secure)
    token = platform.id_token(nonce, platform.resource_claims(sub, LEARNER, module="intro"))
    return client.post(urlsplit(redirect_uri).path, {"id_token": token, "state": state}, secure=secure,
                       **(IN_FRAME if headers is None else headers))


def test_a_first_party_visitor_gets_the_sites_refusal_to_be_framed(client, course, platform):
    for path in ("/", "/modules/intro/", "/accounts/login/"):
        assert refuses_framing(client.get(path)), path


def test_a_launched_session_may_be_framed_by_its_platform_only(client, course, platform):
    register_frame_origins(platform, SCHOOL)
    assert framed_launch(client, platform, "stu-f1")["Location"] == "/modules/intro/"
    page = client.get("/modules/intro/")
    assert page.status_code == 200 and "X-Frame-Options" not in page and "Cookie" in page["Vary"]
    found = directives(page)
    assert found["frame-ancestors"] == f"frame-ancestors 'self' {platform.issuer} {platform.base} {SCHOOL}"
    assert found["script-src"] == "script-src 'self'" and found["form-action"] == "form-action 'self'"  # kept
    assert "X-Frame-Options" not in client.get("/")
    assert refuses_framing(client.get("/admin/"))  # never the admin, whoever is signed in

    client.post("/accounts/logout/")  # signing out ends the session and its framing
    assert refuses_framing(client.get("/modules/intro/"))


def test_another_browser_is_not_framable_after_someone_elses_launch(client, course, platform):
    from django.test import Client

    framed_launch(client, platform, "stu-f2")
    assert refuses_framing(Client().get("/modules/intro/"))


def test_a_frame_origin_that_is_not_an_origin_is_refused_and_nothing_changes(db, platform):
    for bad in ("https://school.instructure.com/courses/1", "javascript:alert(1)", "school.example", "*",
                "https://school.example; script-src *", "https://school.example 'unsafe-inline'"):
        with pytest.raises(CommandError, match="is not an origin"):
            register_frame_origins(platform, bad)
    assert Embedding.objects.get(platform__issuer=platform.issuer).origins == ""  # the fixture's registration


def test_http_launch_keeps_the_sites_lax_cookies(client, course, platform):
    framed_launch(client, platform, "stu-f3")
    assert client.cookies["sessionid"]["samesite"] == "Lax" and not client.cookies["sessionid"]["secure"]


def test_https_launch_in_a_frame_sends_the_session_and_csrf_cookies_cross_site(client, course, platform):
    response = framed_launch(client, platform, "stu-f4", secure=True)
    assert response.status_code == 302
    assert client.cookies["sessionid"]["samesite"] == "None" and client.cookies["sessionid"]["secure"]
    page = client.get("/modules/intro/", secure=True)
    assert "csrfmiddlewaretoken" in page.content.decode()  # its quiz form, posted from inside the frame
    assert client.cookies[settings.CSRF_COOKIE_NAME]["samesite"] == "None"
    assert client.cookies[settings.CSRF_COOKIE_NAME]["secure"]


def test_https_launch_in_its_own_tab_keeps_the_sites_lax_cookies(client, course, platform):
    assert framed_launch(client, platform, "stu-f5", secure=True, headers=IN_TAB).status_code == 302
    assert client.cookies["sessionid"]["samesite"] == "Lax"
    assert "X-Frame-Options" not in client.get("/modules/intro/", secure=True)  # still framable by the LMS


def blocked_launch(client, platform, sub: str):
    """An HTTPS launch in a frame whose browser refused the state cookie set at login."""
    redirect_uri, state, nonce = login_and_nonce(client, platform, secure=True)
    client.cookies.clear()
    token = platform.id_token(nonce, platform.resource_claims(sub, LEARNER, module="intro"))
    return client.post("/lti/launch/", {"id_token": token, "state": state}, secure=True, **IN_FRAME), state


def again_link(response) -> str:
    found = re.search(r'<a class="button" href="([^"]+)" target="_blank" rel="noopener">Open in a new tab</a>',
                      response.content.decode())
    return html_lib.unescape(found.group(1))


def test_refused_cookies_in_a_frame_offer_a_new_tab_that_lands_signed_in(client, course, platform):
    register_frame_origins(platform, SCHOOL)
    response, state = blocked_launch(client, platform, "stu-f6")
    html = response.content.decode()
    assert response.status_code == 400 and "cookies inside the LMS" in html
    assert 'target="_blank"' in html and "Open in a new tab" in html
    assert directives(response)["frame-ancestors"].endswith(SCHOOL) and "X-Frame-Options" not in response
    assert not Identity.objects.exists() and not Cohort.objects.exists()  # nothing was done
    link = again_link(response)
    query = parse_qs(urlsplit(link).query)
    assert urlsplit(link).path == "/lti/login/" and query["iss"] == [platform.issuer]
    assert "id_token" not in link and state not in link  # the login's public parameters, no credential

    # The new tab: first-party cookies, the platform signs its user in again, a fresh launch.
    client.cookies.clear()
    login = client.get(link, secure=True, **IN_TAB)
    assert login.status_code == 302 and urlsplit(login["Location"]).netloc == urlsplit(platform.login_url).netloc
    auth = {k: v[0] for k, v in parse_qs(urlsplit(login["Location"]).query).items()}
    assert auth["state"] != state
    token = platform.id_token(auth["nonce"], platform.resource_claims("stu-f6", LEARNER, module="intro"))
    landed = client.post("/lti/launch/", {"id_token": token, "state": auth["state"]}, secure=True, **IN_TAB)
    assert landed.status_code == 302 and landed["Location"] == "/modules/intro/"
    assert client.get("/modules/intro/", secure=True).wsgi_request.user == Identity.objects.get().user
    assert client.cookies["sessionid"]["samesite"] == "Lax"  # a tab of its own: the site's cookie


def test_the_new_tab_link_is_offered_once(client, course, platform):
    response, state = blocked_launch(client, platform, "stu-f7")
    assert "Open in a new tab" in response.content.decode()
    token = platform.id_token("n", platform.resource_claims("stu-f7", LEARNER, module="intro"))
    again = client.post("/lti/launch/", {"id_token": token, "state": state}, secure=True, **IN_FRAME)
    assert again.status_code == 400 and "Open in a new tab" not in again.content.decode()
    assert refuses_framing(again)


def test_the_new_tab_link_expires_with_the_login_state(client, course, platform, monkeypatch):
    monkeypatch.setattr(login_again, "STATE_LIFETIME", 1)
    redirect_uri, state, nonce = login_and_nonce(client, platform, secure=True)
    client.cookies.clear()
    time.sleep(1.5)
    token = platform.id_token(nonce, platform.resource_claims("stu-f8", LEARNER, module="intro"))
    response = client.post("/lti/launch/", {"id_token": token, "state": state}, secure=True, **IN_FRAME)
    assert response.status_code == 400 and "Open in a new tab" not in response.content.decode()


def test_a_forged_state_in_a_frame_gets_no_link_and_no_framing(client, course, platform):
    token = platform.id_token("n", platform.resource_claims("stu-f9", LEARNER, module="intro"))
    response = client.post("/lti/launch/", {"id_token": token, "state": "state-forged"}, secure=True, **IN_FRAME)
    assert response.status_code == 400 and "Open in a new tab" not in response.content.decode()
    assert refuses_framing(response)


def test_a_deactivated_platforms_login_gets_no_link(client, course, platform):
    from pylti1p3.contrib.django.lti1p3_tool_config.models import LtiTool

    redirect_uri, state, nonce = login_and_nonce(client, platform, secure=True)
    LtiTool.objects.update(is_active=False)
    client.cookies.clear()
    token = platform.id_token(nonce, platform.resource_claims("stu-f10", LEARNER, module="intro"))
    response = client.post("/lti/launch/", {"id_token": token, "state": state}, secure=True, **IN_FRAME)
    assert response.status_code == 400 and "Open in a new tab" not in response.content.decode()
    assert refuses_framing(response)


def test_a_verified_launch_refused_says_why_inside_the_lms_frame_only(client, course, platform):
    redirect_uri, state, nonce = login_and_nonce(client, platform)
    token = platform.id_token(nonce, platform.resource_claims("stu-f11", LEARNER, module="no-such-module"))
    response = client.post("/lti/launch/", {"id_token": token, "state": state}, **IN_FRAME)
    assert response.status_code == 404 and "no-such-module" in response.content.decode()
    assert directives(response)["frame-ancestors"] == f"frame-ancestors 'self' {platform.issuer} {platform.base}"
    assert "X-Frame-Options" not in response
    assert refuses_framing(client.get("/modules/intro/"))  # refused: the session was not marked
