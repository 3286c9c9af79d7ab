"""Deep linking: an instructor picks published modules in the tool, and the tool answers the platform with a
signed LtiDeepLinkingResponse, verified here with the tool's published JWKS as the platform would."""
from __future__ import annotations

import html
import json
import re

import jwt
from jwt.algorithms import RSAAlgorithm
from lti_platform import DL, INSTRUCTOR, LEARNER, launch

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"


def _field(page: str, name: str) -> str:
    return html.unescape(re.search(rf'name="{name}" value="([^"]*)"', page).group(1))


def _verify(token: str, tool_jwks: dict, audience: str) -> dict:
    kid = jwt.get_unverified_header(token)["kid"]
    jwk = next(k for k in tool_jwks["keys"] if k["kid"] == kid)
    return jwt.decode(token, RSAAlgorithm.from_jwk(json.dumps(jwk)), algorithms=["RS256"], audience=audience)


def test_deep_linking_returns_a_signed_link_to_the_picked_module(client, course, platform):
    picker = launch(client, platform, platform.deep_link_claims("teach-dl", INSTRUCTOR))
    page = picker.content.decode()
    assert picker.status_code == 200
    assert 'value="intro"' in page and 'value="cache"' in page  # published modules to pick
    assert f"frame-ancestors 'self' {platform.base}" in picker["Content-Security-Policy"]  # shown in the LMS
    assert "X-Frame-Options" not in picker and "script-src 'self';" in picker["Content-Security-Policy"]
    lesson = client.get("/modules/intro/")  # every other page keeps the site's defaults
    assert lesson["X-Frame-Options"] == "DENY" and "frame-ancestors 'none'" in lesson["Content-Security-Policy"]

    answer = client.post("/lti/deep-link/", {"launch_id": _field(page, "launch_id"), "module": ["intro"]})
    page = answer.content.decode()
    assert answer.status_code == 200
    assert f'action="{platform.base}/deep-link-return"' in page
    assert f"form-action 'self' {platform.base}" in answer["Content-Security-Policy"]
    claims = _verify(_field(page, "JWT"), platform.tool_jwks, audience=platform.issuer)
    assert claims["iss"] == platform.client_id
    assert claims[CLAIM + "message_type"] == "LtiDeepLinkingResponse"
    assert claims[CLAIM + "deployment_id"] == platform.deployment_id
    assert claims[DL + "data"] == "platform-opaque-data"
    [item] = claims[DL + "content_items"]
    assert item["type"] == "ltiResourceLink" and item["url"] == "http://testserver/modules/intro/"
    assert item["custom"] == {"module": "intro"}
    assert item["lineItem"]["scoreMaximum"] == 2  # a grade column for its two-question quiz


def test_the_returned_link_launches_into_its_module(client, course, platform):
    """What the platform stores from the answer (custom module, target URL) brings a student to the module."""
    claims = platform.resource_claims("stu-dl", LEARNER, module="intro", target="http://testserver/modules/intro/")
    assert launch(client, platform, claims)["Location"] == "/modules/intro/"


def test_a_student_cannot_deep_link(client, course, platform):
    response = launch(client, platform, platform.deep_link_claims("stu-dl", LEARNER))
    assert response.status_code == 403 and "Only an instructor" in response.content.decode()


def test_an_unknown_or_expired_picker_is_refused(client, course, platform):
    response = client.post("/lti/deep-link/", {"launch_id": "lti1p3-launch-made-up", "module": ["intro"]})
    assert response.status_code == 400 and "expired" in response.content.decode()


def test_picking_an_unpublished_module_is_refused(client, course, platform):
    picker = launch(client, platform, platform.deep_link_claims("teach-dl", INSTRUCTOR)).content.decode()
    response = client.post("/lti/deep-link/", {"launch_id": _field(picker, "launch_id"), "module": ["nope"]})
    assert response.status_code == 404


def test_cancel_returns_an_empty_deep_linking_response(client, course, platform):
    picker = launch(client, platform, platform.deep_link_claims("teach-dl", INSTRUCTOR)).content.decode()
    assert re.search(r'<button[^>]*name="cancel"[^>]*>Cancel</button>', picker)
    answer = client.post("/lti/deep-link/", {"launch_id": _field(picker, "launch_id"), "module": ["intro"],
                                             "cancel": "1"})
    page = answer.content.decode()
    assert answer.status_code == 200 and "nothing is added" in page
    assert f'action="{platform.base}/deep-link-return"' in page
    claims = _verify(_field(page, "JWT"), platform.tool_jwks, audience=platform.issuer)
    assert claims[CLAIM + "message_type"] == "LtiDeepLinkingResponse"
    assert claims[DL + "content_items"] == [] and claims[DL + "data"] == "platform-opaque-data"
