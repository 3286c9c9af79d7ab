"""Issue 42, safe registration: a platform's JWKS, token and login URLs must be https:// (unless DEBUG, or a
loopback address where no network lies between), refused where a registration is made (the command, the admin
form) and again where one is used; and a launch whose state is not this browser's gets a page that says it expired
or was opened in another window (not that cookies are blocked) and offers to start again.
(The id_token size cap, a 600 kB validly signed token refused in words, is tested in test_launch.py.)"""
from __future__ import annotations

import html as html_lib
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from lti_platform import LEARNER, login_and_nonce
from pylti1p3.contrib.django.lti1p3_tool_config.models import LtiTool

from classes.models import Cohort
from lti.keys import tool_key
from lti.models import Identity

SCHOOL = "https://lms.school.example"


def _register(**urls):
    options = {"login_url": f"{SCHOOL}/auth", "token_url": f"{SCHOOL}/token", "jwks_url": f"{SCHOOL}/jwks", **urls}
    call_command("lti_add_platform", title="School LMS", issuer=SCHOOL, client_id="school-client",
                 deployment=["d-1"], **options)


@pytest.mark.parametrize("option, field", [("jwks_url", "--jwks-url"), ("token_url", "--token-url"),
                                           ("login_url", "--login-url")])
def test_the_command_refuses_a_plain_http_platform_url(db, option, field):
    with pytest.raises(CommandError) as refused:
        _register(**{option: "http://lms.school.example/endpoint"})
    message = str(refused.value)
    assert message.startswith(f"{field} http://lms.school.example/endpoint is not allowed")
    assert "must start with https://" in message
    assert not LtiTool.objects.exists()


def test_https_loopback_and_debug_are_accepted(db, settings):
    _register()
    _register(jwks_url="http://127.0.0.1:9/jwks", token_url="http://localhost:9/token")  # this machine
    assert LtiTool.objects.get().key_set_url == "http://127.0.0.1:9/jwks"
    settings.DEBUG = True  # a developer's own LMS
    _register(jwks_url="http://lms.school.example/jwks")
    assert LtiTool.objects.get().key_set_url == "http://lms.school.example/jwks"


def _admin_form(client):
    client.force_login(User.objects.create_superuser("root", password="root-pass-123"))
    return {"title": "Admin LMS", "is_active": "on", "issuer": "https://admin-lms.example", "client_id": "c-1",
            "auth_login_url": "https://admin-lms.example/auth", "auth_token_url": "https://admin-lms.example/token",
            "key_set_url": "http://admin-lms.example/jwks", "tool_key": tool_key().pk, "deployment_ids": '["d"]'}


def test_the_admin_form_refuses_a_plain_http_platform_url(client, db):
    data = _admin_form(client)
    page = client.post("/admin/lti1p3_tool_config/ltitool/add/", data)
    assert page.status_code == 200 and not LtiTool.objects.exists()
    assert "http://admin-lms.example/jwks is not allowed" in html_lib.unescape(page.content.decode())
    data["key_set_url"] = "https://admin-lms.example/jwks"
    assert client.post("/admin/lti1p3_tool_config/ltitool/add/", data).status_code == 302
    assert LtiTool.objects.get().key_set_url == "https://admin-lms.example/jwks"


def test_a_stored_http_registration_is_refused_at_use(client, course, platform):
    redirect_uri, state, nonce = login_and_nonce(client, platform)  # begun while the registration was sound
    LtiTool.objects.update(key_set_url="http://lms.example.edu/jwks")  # e.g. stored before the check existed
    token = platform.id_token(nonce, platform.resource_claims("stu-http", LEARNER, module="intro"))
    response = client.post("/lti/launch/", {"id_token": token, "state": state})
    page = html_lib.unescape(response.content.decode())
    assert response.status_code == 400 and "uses plain http:// for its JWKS (public keyset) URL" in page
    assert not Identity.objects.exists() and not Cohort.objects.exists()

    login = client.get("/lti/login/", {"iss": platform.issuer, "client_id": platform.client_id, "login_hint": "h",
                                       "target_link_uri": "https://tool.example/lti/launch/"})
    page = html_lib.unescape(login.content.decode())
    assert login.status_code == 400 and "This LMS cannot sign in here" in page and "change it to https://" in page


def _state_page(response) -> str:
    page = html_lib.unescape(response.content.decode())
    assert response.status_code == 400 and "This launch from your LMS was refused" in page
    assert "expired, or it was opened in another window" in page
    assert "cookie" not in page.split("Details for the administrator")[0].lower()  # cookies are not blamed
    return page


def test_a_launch_from_another_window_says_so_and_starts_again_signed_in(client, course, platform):
    redirect_uri, state, nonce = login_and_nonce(client, platform, secure=True)
    client.cookies.clear()  # the launch lands in another browser window than the one that began it
    token = platform.id_token(nonce, platform.resource_claims("stu-w", LEARNER, module="intro"))
    page = _state_page(client.post("/lti/launch/", {"id_token": token, "state": state}, secure=True))
    found = re.search(r'<a class="button" href="([^"]+)">Start again</a>', page)
    again = found.group(1)
    assert urlsplit(again).path == "/lti/login/" and state not in again and "id_token" not in again
    assert not Identity.objects.exists()

    login = client.get(again, secure=True)  # the same login, started again in this window
    auth = {k: v[0] for k, v in parse_qs(urlsplit(login["Location"]).query).items()}
    token = platform.id_token(auth["nonce"], platform.resource_claims("stu-w", LEARNER, module="intro"))
    landed = client.post("/lti/launch/", {"id_token": token, "state": auth["state"]}, secure=True)
    assert landed.status_code == 302 and landed["Location"] == "/modules/intro/"
    assert client.get("/modules/intro/", secure=True).wsgi_request.user == Identity.objects.get().user


def test_an_unknown_or_expired_state_sends_back_to_the_lms(client, course, platform):
    token = platform.id_token("n", platform.resource_claims("stu-x", LEARNER, module="intro"))
    page = _state_page(client.post("/lti/launch/", {"id_token": token, "state": "state-from-long-ago"}))
    assert "Start again</a>" not in page and "from the activity's link in your LMS" in page
