"""LTI Dynamic Registration (1.0): an LMS administrator pastes this tool's registration link into their LMS, which
opens it with `openid_configuration` (its configuration's URL) and a `registration_token`; the tool reads that
configuration, registers itself at the LMS's registration endpoint (its login, launch and JWKS URLs, the services
it uses, the deep-linking message) and stores the answer as a platform registration, as `lti_add_platform` would.
The page then asks the LMS to close its dialog (`org.imsglobal.lti.close`, static/js/lti-registered.js).

Only a link made by `manage.py lti_registration_link` registers (single use, expiring; only its hash is stored):
an open endpoint would let anyone register a platform of their own. The platform's endpoints must be https://
(platform_urls.py), and its configuration's URL must begin with its issuer, as the specification requires. A
failure changes nothing and leaves the link usable; the page says what went wrong.
"""
from __future__ import annotations

import hashlib
import json
import secrets
from datetime import timedelta

from django.db import transaction
from django.http import Http404
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET
from pylti1p3.contrib.django.lti1p3_tool_config.models import LtiTool

from . import library, platform_urls
from .canvas_config import SCOPES, TITLE
from .framing import allow_framing
from .keys import tool_key
from .models import Embedding, RegistrationLink
from .origins import origin_of

TOOL_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-tool-configuration"
PLATFORM_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-platform-configuration"
MAX_CONFIGURATION_BYTES = 256 * 1024
REQUIRED = ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri", "registration_endpoint")


class RegistrationFailed(Exception):
    """What went wrong, in words for the LMS's administrator."""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_link(days: float = 7) -> str:
    """A fresh token for a registration link (path `/lti/register/<token>/`), valid `days` days."""
    token = secrets.token_urlsafe(24)
    RegistrationLink.objects.create(token_hash=_digest(token), expires_at=timezone.now() + timedelta(days=days))
    return token


def _json(response) -> dict:
    if len(response.content) > MAX_CONFIGURATION_BYTES:
        raise RegistrationFailed("the LMS's answer is too large to be a configuration")
    try:
        data = json.loads(response.content)
    except ValueError:
        raise RegistrationFailed(f"the LMS's answer from {response.url} is not JSON") from None
    if not isinstance(data, dict):
        raise RegistrationFailed(f"the LMS's answer from {response.url} is not a JSON object")
    return data


def platform_configuration(url: str, session) -> dict:
    if not platform_urls.allowed(url):
        raise RegistrationFailed(f"the configuration URL {url} is not https://")
    response = session.get(url, headers={"Accept": "application/json"})
    if response.status_code != 200:
        raise RegistrationFailed(f"the LMS's configuration ({url}) answered HTTP {response.status_code}")
    config = _json(response)
    missing = [name for name in REQUIRED if not isinstance(config.get(name), str) or not config[name]]
    if missing:
        raise RegistrationFailed(f"the LMS's configuration lacks {', '.join(missing)}")
    if not url.startswith(config["issuer"]):
        raise RegistrationFailed(f"the configuration URL {url} does not begin with the LMS's issuer "
                                 f"{config['issuer']}")
    insecure = [config[name] for name in REQUIRED[1:] if not platform_urls.allowed(config[name])]
    if insecure:
        raise RegistrationFailed(f"the LMS names plain http:// endpoints ({', '.join(insecure)}): "
                                 f"{platform_urls.WHY}")
    return config


def tool_metadata(request) -> dict:
    """What the tool registers: the OpenID client metadata with the LTI tool configuration."""
    launch = request.build_absolute_uri(reverse("lti:launch"))
    return {
        "application_type": "web", "response_types": ["id_token"], "grant_types": ["implicit", "client_credentials"],
        "initiate_login_uri": request.build_absolute_uri(reverse("lti:login")), "redirect_uris": [launch],
        "client_name": TITLE, "jwks_uri": request.build_absolute_uri(reverse("lti:jwks")),
        "token_endpoint_auth_method": "private_key_jwt", "scope": " ".join(SCOPES),
        TOOL_CONFIGURATION: {
            "domain": request.get_host(), "target_link_uri": launch,
            "claims": ["iss", "sub", "name", "given_name", "family_name", "email"],
            "messages": [{"type": "LtiDeepLinkingRequest", "target_link_uri": launch, "label": TITLE}],
        },
    }


def register_at(config: dict, token: str, metadata: dict, session) -> tuple[str, list[str]]:
    """POST the tool's metadata to the LMS; its (client id, deployment ids)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    response = session.post(config["registration_endpoint"], data=json.dumps(metadata), headers=headers)
    if response.status_code not in (200, 201):
        raise RegistrationFailed(f"the LMS refused the registration: HTTP {response.status_code} "
                                 f"{response.text[:300]}")
    answer = _json(response)
    client_id = answer.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise RegistrationFailed("the LMS's answer names no client_id")
    deployment = (answer.get(TOOL_CONFIGURATION) or {}).get("deployment_id")
    return client_id, [str(deployment)] if deployment else []


@transaction.atomic
def save_platform(config: dict, client_id: str, deployments: list[str]) -> LtiTool:
    platform = LtiTool.objects.filter(issuer=config["issuer"], client_id=client_id).first() \
        or LtiTool(issuer=config["issuer"], client_id=client_id)
    family = (config.get(PLATFORM_CONFIGURATION) or {}).get("product_family_code")
    platform.title = str(family or origin_of(config["issuer"]) or config["issuer"])[:255]
    platform.auth_login_url, platform.auth_token_url = config["authorization_endpoint"], config["token_endpoint"]
    platform.key_set_url = config["jwks_uri"]
    platform.auth_audience = config.get("authorization_server") or None
    known = json.loads(platform.deployment_ids or "[]") if platform.pk else []
    platform.deployment_ids = json.dumps(sorted(set(known) | set(deployments)))
    platform.tool_key, platform.is_active = tool_key(), True
    platform.save()
    Embedding.objects.get_or_create(platform=platform)
    return platform


@require_GET
def register(request, token: str):
    link = RegistrationLink.objects.filter(token_hash=_digest(token)).first()
    if link is None or link.used_at is not None or link.expires_at < timezone.now():
        raise Http404("This registration link is unknown, used or expired: ask the tool's administrator for one.")
    url = request.GET.get("openid_configuration", "")
    session = library.PlatformSession()
    try:
        config = platform_configuration(url, session)
        client_id, deployments = register_at(config, request.GET.get("registration_token", ""),
                                             tool_metadata(request), session)
    except RegistrationFailed as error:
        return render(request, "lti/registered.html", {"error": str(error)}, status=400)
    except Exception as error:  # noqa: BLE001 - the LMS down, slow or unreachable
        return render(request, "lti/registered.html", {"error": f"the LMS could not be reached: {error}"}, status=502)
    platform = save_platform(config, client_id, deployments)
    RegistrationLink.objects.filter(pk=link.pk).update(used_at=timezone.now(), platform=platform)
    response = render(request, "lti/registered.html", {"platform": platform, "deployments": deployments})
    origins = {origin_of(config["issuer"]), origin_of(url)}  # the LMS shows this page in its dialog
    return allow_framing(response, sorted(origin for origin in origins if origin))
