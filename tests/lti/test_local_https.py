"""`make run-https` (scripts/run_https.py --app daphne here): nginx with a generated self-signed certificate in front
of Daphne, on the test database. Fetched over real TLS, verified against that certificate: pages are served, and
an LTI login's redirect URI keeps the scheme and the port the browser used (`Host $http_host`, X-Forwarded-Proto),
with the launch cookie `Secure; SameSite=None` as an LMS's cross-site launch needs."""
from __future__ import annotations

import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "demos"))
from demo_stack import free_port  # noqa: E402
from nginx_proxy import MISSING, NGINX  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]
ROOT = Path(__file__).resolve().parents[2]
ISSUER, CLIENT = "https://lms.school.example", "tool-client-1"


@pytest.fixture
def tls_site(tmp_path):
    if NGINX is None:
        pytest.skip(MISSING)
    call_command("lti_add_platform", title="School LMS", issuer=ISSUER, client_id=CLIENT,
                 login_url=f"{ISSUER}/auth", token_url=f"{ISSUER}/token", jwks_url=f"{ISSUER}/jwks",
                 deployment=["deployment-1"])
    https_port = free_port()
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{django_settings.DATABASES['default']['TEST']['NAME']}",
           "PORT": str(free_port()), "HTTPS_PORT": str(https_port), "RUN_HTTPS_DIR": str(tmp_path),
           "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    log = tmp_path / "run-https.log"
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "run_https.py"), "--app", "daphne"], cwd=ROOT,
                            env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "Inference Lab over TLS" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
        context = ssl.create_default_context(cafile=str(tmp_path / "tls" / "localhost.crt"))
        yield https_port, context
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the script stops nginx and Daphne, each in its own group
        proc.wait(timeout=30)


def fetch(port: int, context: ssl.SSLContext, host: str, path: str) -> http.client.HTTPResponse:
    connection = http.client.HTTPSConnection(host, port, context=context, timeout=30)
    connection.request("GET", path)
    response = connection.getresponse()
    response.body = response.read()
    connection.close()
    return response


def test_the_stack_behind_tls_serves_pages_and_lti_urls_keep_their_port(tls_site):
    port, context = tls_site
    for host in ("localhost", "127.0.0.1"):  # the certificate names both; verification is on
        assert fetch(port, context, host, "/accounts/login/").status == 200
    login = fetch(port, context, "localhost", "/lti/login/?" + urlencode({
        "iss": ISSUER, "client_id": CLIENT, "login_hint": "someone", "lti_deployment_id": "deployment-1",
        "target_link_uri": f"https://localhost:{port}/lti/launch/"}))
    assert login.status == 302, login.headers
    location = urlsplit(login.headers["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == f"{ISSUER}/auth"
    assert parse_qs(location.query)["redirect_uri"] == [f"https://localhost:{port}/lti/launch/"]
    cookies = login.headers.get_all("Set-Cookie")
    assert any(c.startswith("lti1p3-") and "Secure" in c and "SameSite=None" in c for c in cookies), cookies
    # Plain HTTP to the TLS port is refused by nginx, not passed on.
    plain = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    plain.request("GET", "/")
    assert plain.getresponse().status == 400
    plain.close()


def test_the_canvas_json_config_names_this_sites_https_urls_and_they_answer(tls_site):
    """What a Canvas admin pastes (Developer Keys, "Enter URL"): every URL as the browser reached the site."""
    port, context = tls_site
    response = fetch(port, context, "localhost", "/lti/canvas.json")
    assert response.status == 200 and response.headers["Content-Type"] == "application/json"
    config = json.loads(response.body)
    site = f"https://localhost:{port}"
    assert (config["oidc_initiation_url"], config["target_link_uri"], config["public_jwk_url"]) == (
        f"{site}/lti/login/", f"{site}/lti/launch/", f"{site}/lti/jwks/")
    assert "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly" in config["scopes"]
    assert "https://purl.imsglobal.org/spec/lti-ags/scope/score" in config["scopes"]
    canvas = config["extensions"][0]
    assert canvas["platform"] == "canvas.instructure.com" and canvas["domain"] == f"localhost:{port}"
    assert {p["placement"]: (p["message_type"], p["target_link_uri"]) for p in canvas["settings"]["placements"]} == {
        "link_selection": ("LtiDeepLinkingRequest", f"{site}/lti/launch/"),
        "assignment_selection": ("LtiDeepLinkingRequest", f"{site}/lti/launch/")}
    keys = json.loads(fetch(port, context, "localhost", "/lti/jwks/").body)["keys"]
    assert keys and all(key["kty"] == "RSA" and key["kid"] for key in keys)
