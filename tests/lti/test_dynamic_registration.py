"""LTI Dynamic Registration: an LMS opens the tool's single-use registration link with its configuration's URL and a
registration token; the tool registers itself there (the test platform, over real HTTP) and stores the platform,
whose launches then work. Refused: an unknown, used or expired link; a configuration whose URL does not begin with
its issuer; a registration the LMS refuses (nothing stored, the link still usable)."""
from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from lti_platform import INSTRUCTOR, REGISTRATION_TOKEN, Platform, launch
from pylti1p3.contrib.django.lti1p3_tool_config.models import LtiTool

from classes.models import Cohort
from lti.models import RegistrationLink

CANVAS_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"


@pytest.fixture
def lms(db):
    """A platform nobody registered yet, whose issuer is its own address (as a real LMS's is)."""
    platform = Platform()
    platform.issuer = platform.base
    yield platform
    platform.close()


def registration_path() -> str:
    out = io.StringIO()
    call_command("lti_registration_link", base="http://testserver", stdout=out)
    url = out.getvalue().strip()
    assert url.startswith("http://testserver/lti/register/")
    return url.removeprefix("http://testserver")


def register(client, lms, path: str, *, token: str = REGISTRATION_TOKEN, config: str | None = None):
    return client.get(path, {"openid_configuration": config or f"{lms.base}/.well-known/openid-configuration",
                             "registration_token": token})


def test_an_lms_registers_the_tool_from_its_link_and_launches_work(client, course, lms):
    path = registration_path()
    page = register(client, lms, path)
    assert page.status_code == 200, page.content.decode()
    html = page.content.decode()
    assert 'data-client-id="dyn-client-1"' in html and "js/lti-registered.js" in html
    assert lms.base in page["Content-Security-Policy"]  # the LMS's dialog may show it
    sent = lms.registrations[-1]
    assert sent["authorization"] == f"Bearer {REGISTRATION_TOKEN}"
    metadata = sent["metadata"]
    assert metadata["initiate_login_uri"] == "http://testserver/lti/login/"
    assert metadata["redirect_uris"] == ["http://testserver/lti/launch/"]
    assert metadata["jwks_uri"] == "http://testserver/lti/jwks/" and CANVAS_SCOPE in metadata["scope"]
    platform = LtiTool.objects.get(issuer=lms.issuer)
    assert (platform.client_id, platform.auth_login_url, platform.auth_token_url, platform.key_set_url) == (
        "dyn-client-1", lms.login_url, lms.token_url, lms.jwks_url)
    assert platform.deployment_ids == f'["{lms.deployment_id}"]'

    # The registered platform's launches are verified and run as any other's.
    lms.client_id = "dyn-client-1"
    lms.tool_jwks = client.get("/lti/jwks/").json()
    response = launch(client, lms, lms.resource_claims("teach-dyn", INSTRUCTOR, module="intro"))
    assert response.status_code == 302 and Cohort.objects.filter(lti_context__platform=platform).exists()

    # The link was single use.
    assert register(client, lms, path).status_code == 404
    assert LtiTool.objects.filter(issuer=lms.issuer).count() == 1


def test_bad_registrations_store_nothing(client, course, lms):
    assert register(client, lms, "/lti/register/not-a-link/").status_code == 404
    path = registration_path()
    refused = register(client, lms, path, token="wrong-token")
    assert refused.status_code == 400 and "the LMS refused the registration: HTTP 401" in refused.content.decode()
    unreachable = register(client, lms, path, config="http://127.0.0.1:9/.well-known/openid-configuration")
    assert unreachable.status_code == 502 and "could not be reached" in unreachable.content.decode()
    insecure = register(client, lms, path, config="http://lms.school.example/.well-known/openid-configuration")
    assert insecure.status_code == 400 and "is not https://" in insecure.content.decode()
    lms.issuer = "https://lms.example.edu"  # the configuration now names an issuer its URL does not begin with
    mismatch = register(client, lms, path)
    assert mismatch.status_code == 400 and "does not begin with the LMS" in mismatch.content.decode()
    assert not LtiTool.objects.exists()
    lms.issuer = lms.base
    RegistrationLink.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert register(client, lms, path).status_code == 404 and not LtiTool.objects.exists()
