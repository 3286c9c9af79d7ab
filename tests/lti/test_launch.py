"""OIDC login and resource-link launches from a simulated platform: real keys, real signed id_tokens, the
platform's JWKS fetched over HTTP by the library."""
from __future__ import annotations

import time
from html import unescape

import jwt
import pytest
from django.contrib.auth.models import User
from jwt.utils import base64url_decode
from lti_platform import INSTRUCTOR, LEARNER, Platform, launch, login_and_nonce, new_key, pem

from classes.models import Cohort, Enrollment
from lti.models import Identity, ResourceLink


def test_jwks_publishes_the_tool_public_key_only(client, db):
    keys = client.get("/lti/jwks/").json()["keys"]
    assert len(keys) == 1
    assert keys[0]["kty"] == "RSA" and keys[0]["kid"] and keys[0]["alg"] == "RS256"
    assert "d" not in keys[0] and "p" not in keys[0]  # no private part
    assert client.get("/lti/jwks/").json()["keys"] == keys  # made once, then kept


def test_login_initiation_for_an_unknown_platform_is_refused(client, db):
    response = client.get("/lti/login/", {"iss": "https://unknown.example", "login_hint": "x", "client_id": "y"})
    assert response.status_code == 400
    assert "could not be matched to a registered platform" in response.content.decode()


def test_login_initiation_without_a_login_hint_is_refused(client, platform):
    response = client.post("/lti/login/", {"iss": platform.issuer, "client_id": platform.client_id})
    assert response.status_code == 400 and "Could not find login hint" in response.content.decode()


def test_a_launch_that_is_not_a_jwt_is_refused(client, course, platform):
    _, state, _ = login_and_nonce(client, platform)
    _refused(client.post("/lti/launch/", {"id_token": "not-a-token", "state": state}), "JWT must contain 3 parts")
    _refused(client.post("/lti/launch/", {"state": state}), "Missing id_token")


def test_student_launch_lands_in_the_module_and_creates_and_enrolls_them(client, course, platform):
    response = launch(client, platform, platform.resource_claims("stu-1", LEARNER, module="intro"))
    assert response.status_code == 302 and response["Location"] == "/modules/intro/"
    identity = Identity.objects.get(issuer=platform.issuer, subject="stu-1")
    user = identity.user
    assert not user.has_usable_password() and user.first_name == "Stu-1" and user.email == "stu-1@school.example"
    cohort = Cohort.objects.get(lti_context__context_id="course-101")
    assert cohort.name == "Inference 101 (Fall)" and not cohort.joining_open
    assert Enrollment.objects.get(cohort=cohort, user=user).source == Enrollment.Source.LTI
    page = client.get("/modules/intro/")
    assert page.status_code == 200 and page.wsgi_request.user == user  # signed in
    link = ResourceLink.objects.get(resource_link_id="link-1")
    assert link.module.slug == "intro" and link.lineitem == f"{platform.base}/lineitems/7"

    # The second launch finds the same account and enrollment.
    client.logout()
    assert launch(client, platform, platform.resource_claims("stu-1", LEARNER, module="intro")).status_code == 302
    assert User.objects.filter(lti_identities__subject="stu-1").count() == 1
    assert Enrollment.objects.filter(user=user).count() == 1


def test_module_from_the_target_link_uri(client, course, platform):
    claims = platform.resource_claims("stu-2", LEARNER, target="https://tool.example/modules/cache/")
    response = launch(client, platform, claims)
    assert response.status_code == 302 and response["Location"] == "/modules/cache/"


def test_instructor_launch_creates_the_cohort_and_names_them_instructor(client, course, platform):
    response = launch(client, platform, platform.resource_claims("teach-1", INSTRUCTOR, module="intro"))
    assert response.status_code == 302
    teacher = Identity.objects.get(subject="teach-1").user
    cohort = Cohort.objects.get(lti_context__context_id="course-101")
    assert list(cohort.instructors.all()) == [teacher]
    assert not Enrollment.objects.filter(user=teacher).exists()
    assert not teacher.is_staff  # an LMS role grants no authoring rights here
    client.logout()
    launch(client, platform, platform.resource_claims("stu-3", LEARNER, module="intro"))
    assert Cohort.objects.count() == 1
    assert list(cohort.enrollments.values_list("user__lti_identities__subject", flat=True)) == ["stu-3"]


def test_a_module_that_is_not_published_is_a_clear_404(client, course, platform):
    response = launch(client, platform, platform.resource_claims("stu-4", LEARNER, module="no-such-module"))
    assert response.status_code == 404
    assert "no-such-module" in response.content.decode()
    assert not Identity.objects.exists()


def _refused(response, words: str) -> None:
    html = response.content.decode()
    assert response.status_code == 400, html
    assert "This launch from your LMS was refused" in html and words in html
    assert not Identity.objects.exists() and not Cohort.objects.exists()
    assert "_auth_user_id" not in response.wsgi_request.session


def test_a_token_signed_by_another_key_is_refused(client, course, platform):
    response = launch(client, platform, platform.resource_claims("stu-5", LEARNER, module="intro"), key=new_key())
    _refused(response, "Signature verification failed")


def test_an_expired_token_is_refused(client, course, platform):
    claims = {**platform.resource_claims("stu-exp", LEARNER, module="intro"), "exp": int(time.time()) - 60}
    _refused(launch(client, platform, claims), "Signature has expired")


def test_a_token_for_another_audience_is_refused(client, course, platform):
    response = launch(client, platform, platform.resource_claims("stu-6", LEARNER, module="intro"),
                      aud="some-other-tool")
    _refused(response, "not found")


def test_a_token_from_an_unregistered_deployment_is_refused(client, course, platform):
    claims = platform.resource_claims("stu-7", LEARNER, module="intro")
    claims["https://purl.imsglobal.org/spec/lti/claim/deployment_id"] = "someone-elses-deployment"
    _refused(launch(client, platform, claims), "Unable to find deployment")


def test_a_token_with_a_nonce_not_issued_by_the_tool_is_refused(client, course, platform):
    redirect_uri, state, _ = login_and_nonce(client, platform)
    token = platform.id_token("made-up-nonce", platform.resource_claims("stu-8", LEARNER, module="intro"))
    _refused(client.post("/lti/launch/", {"id_token": token, "state": state}), "Invalid Nonce")


def test_a_replayed_launch_is_refused(client, course, platform):
    redirect_uri, state, nonce = login_and_nonce(client, platform)
    token = platform.id_token(nonce, platform.resource_claims("stu-9", LEARNER, module="intro"))
    assert client.post("/lti/launch/", {"id_token": token, "state": state}).status_code == 302
    client.logout()
    again = client.post("/lti/launch/", {"id_token": token, "state": state})
    assert again.status_code == 400 and "Invalid Nonce" in again.content.decode()
    assert "_auth_user_id" not in again.wsgi_request.session


def test_a_launch_without_the_login_state_is_refused(client, course, platform):
    _, _, nonce = login_and_nonce(client, platform)
    token = platform.id_token(nonce, platform.resource_claims("stu-10", LEARNER, module="intro"))
    _refused(client.post("/lti/launch/", {"id_token": token, "state": "state-forged"}), "State not found")


def test_on_https_the_launch_state_rides_on_cross_site_cookies(client, course, platform):
    """The LMS's POST is cross-site: the library's own cookies carry the launch (SameSite=None; Secure), and the
    site's session cookie keeps its defaults."""
    login_and_nonce(client, platform, secure=True)
    lti_cookies = {name: c for name, c in client.cookies.items() if name.startswith("lti1p3-")}
    assert "lti1p3-session-id" in lti_cookies
    assert all(c["samesite"] == "None" and c["secure"] for c in lti_cookies.values())
    assert "sessionid" not in client.cookies

    client.cookies.clear()
    response = launch(client, platform, platform.resource_claims("stu-https", LEARNER, module="intro"), secure=True)
    assert response.status_code == 302 and response["Location"] == "/modules/intro/"
    assert client.cookies["sessionid"]["samesite"] == "Lax"  # the site's default, untouched


def test_an_https_launch_without_the_browser_cookie_is_refused(client, course, platform):
    redirect_uri, state, nonce = login_and_nonce(client, platform, secure=True)
    token = platform.id_token(nonce, platform.resource_claims("stu-x", LEARNER, module="intro"))
    client.cookies.clear()  # another browser, or cookies blocked
    _refused(client.post("/lti/launch/", {"id_token": token, "state": state}, secure=True), "Missing")


def test_an_lms_user_never_takes_over_a_local_account_with_their_email(client, course, platform):
    User.objects.create_user("local-student", email="stu-mail@school.example", password="x-password-123")
    launch(client, platform, platform.resource_claims("stu-mail", LEARNER, module="intro"))
    user = Identity.objects.get(subject="stu-mail").user
    assert user.username != "local-student" and user.email == ""



def signed_with_raw_claim(platform: Platform, nonce: str, name: str, raw_json: str) -> str:
    """A correctly signed id_token whose body also carries the claim `name` as the JSON text `raw_json`, written
    out as it stands (encoding a 900-deep value would recurse through this test's own stack)."""
    token = platform.id_token(nonce, platform.resource_claims("stu-raw", LEARNER, module="intro"))
    body = base64url_decode(token.split(".")[1]).decode()
    body = body[:-1] + f', "{name}": {raw_json}}}'
    return jwt.api_jws.encode(body.encode(), pem(platform.key), algorithm="RS256",
                              headers={"kid": platform.kid, "typ": "JWT"})


@pytest.mark.parametrize("raw_json, says", [
    # Under json.loads' recursion limit, so it parsed, then broke pickling into the cache: was a 500.
    ("[" * 900 + "]" * 900, "the id_token's claims cannot be read: the JSON nests more than 32 levels deep"),
    # Over it, and long: refused for its length before anything decodes it (was "Invalid JWT format").
    ("[" * 100_000 + "]" * 100_000, "at most 65,536 characters are read"),
    ('"' + "x" * 600_000 + '"', "at most 65,536 characters are read"),  # 600 kB: was accepted and cached whole
    ("9" * 5000, "the id_token's claims cannot be read: the number 99999999999999999999… (5,000 characters) is "
                 "too long: at most 18 digits"),  # was "Invalid JWT format"
])
def test_a_correctly_signed_token_built_to_break_the_parser_is_refused(client, course, platform, raw_json, says):
    """Issue 43: only a registered platform's key can sign these, but the answer is still a clear 400 page."""
    _, state, nonce = login_and_nonce(client, platform)
    token = signed_with_raw_claim(platform, nonce, "https://lms.example.edu/claim/extra", raw_json)
    started = time.process_time()
    response = client.post("/lti/launch/", {"id_token": token, "state": state})
    assert time.process_time() - started < 3.0  # milliseconds, with room for a busy test machine
    _refused(response, "The launch could not be verified")
    assert says in unescape(response.content.decode())
