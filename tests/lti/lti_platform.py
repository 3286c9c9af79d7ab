"""A simulated LMS for the LTI tests: its own RSA key, a JWKS, a token endpoint and AGS score endpoints served
over real HTTP from a thread, and real signed id_tokens. It checks what a platform checks (the tool's client
assertion against the tool's published JWKS, the bearer token on score posts) and records what it receives."""
from __future__ import annotations

import json
import threading
import time
import uuid
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
AGS = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
NRPS = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
REGISTRATION_TOKEN = "registration-token-1"
ACCESS_TOKEN = "platform-access-token"


def new_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem(key) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


class Platform:
    issuer = "https://lms.example.edu"
    client_id = "inference-lab-client"
    deployment_id = "deployment-1"
    kid = "platform-key-1"

    def __init__(self) -> None:
        self.key = new_key()
        self.tool_jwks: dict = {}  # set by the test from the tool's /lti/jwks/
        self.down = False
        self.score_delay = 0.0  # seconds the score endpoint sleeps before answering (a hanging LMS)
        self.score_status = 200  # what the score endpoint answers when it is up
        self.lineitems: list[dict] = []  # the grade columns the tool added (each with its id URL)
        self.token_requests: list[dict] = []
        self.scores: list[dict] = []
        self.roster: list[list[dict]] = []  # the membership service's pages
        self.nrps_down = False
        self.claims_for: dict[str, dict] = {}  # login_hint -> the claims its browser launches carry
        self.registrations: list[dict] = []  # what dynamic registrations sent (its bearer token, its metadata)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- URLs a registration names ---------------------------------------------------------------------------
    @property
    def jwks_url(self) -> str:
        return f"{self.base}/jwks"

    @property
    def token_url(self) -> str:
        return f"{self.base}/token"

    @property
    def login_url(self) -> str:
        return f"{self.base}/auth"

    def jwks(self) -> dict:
        jwk = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    # --- id_tokens --------------------------------------------------------------------------------------------
    def id_token(self, nonce: str, claims: dict, *, key=None, aud: str | None = None) -> str:
        now = int(time.time())
        body = {"iss": self.issuer, "aud": aud or self.client_id, "iat": now, "exp": now + 300, "nonce": nonce,
                CLAIM + "version": "1.3.0", CLAIM + "deployment_id": self.deployment_id, **claims}
        return jwt.encode(body, pem(key or self.key), algorithm="RS256", headers={"kid": self.kid})

    def resource_claims(self, sub: str, role: str, *, module: str | None = None, target: str = "",
                        link_id: str = "link-1", context_id: str = "course-101", lineitem: str | None = "7",
                        nrps: bool = False) -> dict:
        claims = {
            "sub": sub, "given_name": sub.title(), "family_name": "Tester", "email": f"{sub}@school.example",
            CLAIM + "message_type": "LtiResourceLinkRequest",
            CLAIM + "roles": [role],
            CLAIM + "resource_link": {"id": link_id, "title": "Week 1"},
            CLAIM + "context": {"id": context_id, "label": "INF101", "title": "Inference 101 (Fall)"},
            CLAIM + "target_link_uri": target or "https://tool.example/lti/launch/",
        }
        if module:
            claims[CLAIM + "custom"] = {"module": module}
        if lineitem:
            claims[AGS] = {"scope": [SCORE_SCOPE], "lineitems": f"{self.base}/lineitems",
                           "lineitem": f"{self.base}/lineitems/{lineitem}"}
        if nrps:
            claims[NRPS] = {"context_memberships_url": f"{self.base}/memberships?page=0",
                            "service_versions": ["2.0"]}
        return claims

    def deep_link_claims(self, sub: str, role: str) -> dict:
        return {
            "sub": sub,
            CLAIM + "message_type": "LtiDeepLinkingRequest",
            CLAIM + "roles": [role],
            CLAIM + "context": {"id": "course-101", "title": "Inference 101 (Fall)"},
            CLAIM + "target_link_uri": "https://tool.example/lti/launch/",
            DL + "deep_linking_settings": {
                "deep_link_return_url": f"{self.base}/deep-link-return",
                "accept_types": ["ltiResourceLink"], "accept_presentation_document_targets": ["iframe", "window"],
                "accept_multiple": True, "data": "platform-opaque-data",
            },
        }

    # --- the endpoints ----------------------------------------------------------------------------------------
    def _handler(self):
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def do_GET(self):
                if platform.down:
                    return self._send(503, {"error": "down"})
                if self.path == "/jwks":
                    return self._send(200, platform.jwks())
                if self.path.startswith("/memberships?page="):
                    return self._memberships(int(self.path.rsplit("=", 1)[1]))
                url = urlsplit(self.path)
                path, query = url.path, {k: v[0] for k, v in parse_qs(url.query).items()}
                if path == "/auth":
                    return self._authorize(query)
                if path == "/.well-known/openid-configuration":  # LTI Dynamic Registration reads this first
                    return self._send(200, {
                        "issuer": platform.issuer, "authorization_endpoint": platform.login_url,
                        "token_endpoint": platform.token_url, "jwks_uri": platform.jwks_url,
                        "registration_endpoint": f"{platform.base}/register",
                        "https://purl.imsglobal.org/spec/lti-platform-configuration": {
                            "product_family_code": "test-lms", "version": "1"}})
                if path == "/lineitems":
                    if self.headers.get("Authorization") != f"Bearer {ACCESS_TOKEN}":
                        return self._send(401, {"error": "bad token"})
                    return self._send(200, platform.lineitems)
                if path.startswith("/lineitems/"):  # one grade column, by its id URL
                    if self.headers.get("Authorization") != f"Bearer {ACCESS_TOKEN}":
                        return self._send(401, {"error": "bad token"})
                    found = [item for item in platform.lineitems if item.get("id") == platform.base + path]
                    return self._send(200, found[0]) if found else self._send(404, {})
                if path == "/frame":
                    return self._html(f'<h1>LMS course page</h1><iframe id="tool" title="Tool" width="1100" '
                                      f'height="700" src="{escape(query["src"])}"></iframe>')
                return self._send(404, {})

            def _html(self, body: str) -> None:
                data = f"<!doctype html><html><head><title>LMS</title></head><body>{body}</body></html>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorize(self, query: dict) -> None:
                """The OIDC authorization endpoint, as a browser meets it: the LMS's user is signed in (the
                claims registered for the login hint), and the answer is a form posted to the tool at once."""
                claims = platform.claims_for.get(query.get("login_hint", ""))
                if claims is None or query.get("client_id") != platform.client_id:
                    return self._send(400, {"error": "unknown login"})
                token = platform.id_token(query["nonce"], claims)
                self._html(f'<form id="launch" method="post" action="{escape(query["redirect_uri"])}">'
                           f'<input type="hidden" name="id_token" value="{escape(token)}">'
                           f'<input type="hidden" name="state" value="{escape(query["state"])}"></form>'
                           '<script>document.getElementById("launch").submit()</script>')

            def _memberships(self, page: int) -> None:
                if platform.nrps_down or self.headers.get("Authorization") != f"Bearer {ACCESS_TOKEN}":
                    return self._send(503, {"error": "unavailable"})
                data = json.dumps({"id": "m", "context": {"id": "course-101"},
                                   "members": platform.roster[page]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.ims.lti-nrps.v2.membershipcontainer+json")
                if page + 1 < len(platform.roster):
                    self.send_header("Link", f'<{platform.base}/memberships?page={page + 1}>; rel="next"')
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = self._body()
                if platform.down:
                    return self._send(503, {"error": "down"})
                path = urlsplit(self.path).path
                if path == "/token":
                    return self._token({k: v[0] for k, v in parse_qs(body.decode()).items()})
                if path == "/register":  # Dynamic Registration: the tool's metadata, behind the one-time token
                    platform.registrations.append({"authorization": self.headers.get("Authorization"),
                                                   "metadata": json.loads(body)})
                    if self.headers.get("Authorization") != f"Bearer {REGISTRATION_TOKEN}":
                        return self._send(401, {"error": "bad registration token"})
                    return self._send(201, {"client_id": "dyn-client-1", **json.loads(body),
                                            "https://purl.imsglobal.org/spec/lti-tool-configuration": {
                                                "deployment_id": platform.deployment_id}})
                if path == "/lineitems":  # the tool adds a grade column
                    if self.headers.get("Authorization") != f"Bearer {ACCESS_TOKEN}":
                        return self._send(401, {"error": "bad token"})
                    item = {**json.loads(body), "id": f"{platform.base}/lineitems/added-{len(platform.lineitems) + 1}"}
                    platform.lineitems.append(item)
                    return self._send(201, item)
                if path.startswith("/lineitems/") and path.endswith("/scores"):
                    if self.headers.get("Authorization") != f"Bearer {ACCESS_TOKEN}":
                        return self._send(401, {"error": "bad token"})
                    time.sleep(platform.score_delay)
                    if platform.score_status != 200:
                        return self._send(platform.score_status, {"error": "score refused"})
                    platform.scores.append({"path": path, "content_type": self.headers.get("Content-Type"),
                                            "body": json.loads(body)})
                    return self._send(200, {})
                return self._send(404, {})

            def _token(self, form: dict) -> None:
                """Client credentials with a JWT assertion, verified against the tool's published key."""
                try:
                    header = jwt.get_unverified_header(form["client_assertion"])
                    jwk = next(k for k in platform.tool_jwks["keys"] if k["kid"] == header["kid"])
                    claims = jwt.decode(form["client_assertion"], RSAAlgorithm.from_jwk(json.dumps(jwk)),
                                        algorithms=["RS256"], audience=platform.token_url)
                    assert claims["iss"] == claims["sub"] == platform.client_id
                    assert form["grant_type"] == "client_credentials"
                except Exception as error:  # noqa: BLE001 - the platform answers any bad assertion the same way
                    platform.token_requests.append({"refused": repr(error)})
                    return self._send(400, {"error": "invalid_client"})
                platform.token_requests.append({"claims": claims, "scope": form.get("scope", "")})
                self._send(200, {"access_token": ACCESS_TOKEN, "token_type": "Bearer", "expires_in": 3600,
                                 "scope": form.get("scope", "")})

        return Handler


def login_and_nonce(client, platform: Platform, *, secure: bool = False) -> tuple[str, str, str]:
    """The OIDC login initiation, as the platform starts it: returns (redirect_uri, state, nonce)."""
    response = client.get("/lti/login/", {"iss": platform.issuer, "client_id": platform.client_id,
                                          "login_hint": "hint-" + uuid.uuid4().hex,
                                          "target_link_uri": "https://tool.example/lti/launch/",
                                          "lti_deployment_id": platform.deployment_id}, secure=secure)
    assert response.status_code == 302, response.content
    location = urlsplit(response["Location"])
    assert location.netloc == urlsplit(platform.login_url).netloc
    query = {k: v[0] for k, v in parse_qs(location.query).items()}
    assert query["client_id"] == platform.client_id and query["response_mode"] == "form_post"
    return query["redirect_uri"], query["state"], query["nonce"]


def launch(client, platform: Platform, claims: dict, *, secure: bool = False, **token_options):
    redirect_uri, state, nonce = login_and_nonce(client, platform, secure=secure)
    token = platform.id_token(nonce, claims, **token_options)
    return client.post(urlsplit(redirect_uri).path, {"id_token": token, "state": state}, secure=secure)


def post_quiz(client, slug: str, answers: dict):
    """Answers named by authored choice order, sent as the page would (see tests/courseapp)."""
    from django.urls import reverse

    from courseapp.models import Module
    from courseapp.quiz import new_seed, seed_token, shuffled

    seed = new_seed()
    data = {"quiz_seed": seed_token(slug, seed)}
    for question in Module.objects.get(slug=slug).questions.all():
        values = answers.get(question.field_name)
        if values is None:
            continue
        shown = [c.order for c in shuffled(question, seed)]
        picks = [values] if isinstance(values, str) else values
        data[question.field_name] = [str(shown.index(int(v)) + 1) for v in picks]
    return client.post(reverse("courseapp:quiz", args=[slug]), data)
