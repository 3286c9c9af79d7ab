"""The way out of a frame whose browser refuses third-party cookies: the same OIDC login, restarted in a tab.

When the LMS frames the tool and the browser will not keep this site's cookies there, the launch's state cookie
is refused too, so the launch cannot be verified inside the frame (and no session could follow it). What the
tool can offer is the login the platform started, restarted at the top level: there the cookies are
first-party, the platform signs its user in again and posts a fresh id_token, and the student lands signed in.
The link carries only the login's own public parameters (as the platform sent them), never a credential.

Invariant: a link is made only for a state this tool issued within STATE_LIFETIME, once (the entry is removed
when the refusal page uses it).
"""
from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit

from django.core.cache import cache
from django.urls import reverse
from pylti1p3.contrib.django.lti1p3_tool_config.models import LtiTool

from .framing import origins_of

STATE_LIFETIME = 5 * 60  # seconds: the library's state cookie lives as long
LOGIN_PARAMS = ("iss", "client_id", "login_hint", "lti_message_hint", "target_link_uri", "lti_deployment_id")
MAX_PARAM = 4096  # characters; a longer value is not a login parameter


def _key(state: str) -> str:
    return f"lti-login-again:{state}"


def remember_login(request, location: str) -> None:
    """After the login initiation redirected to the platform (`location`, carrying the new state): keep the
    login's parameters under that state."""
    state = parse_qs(urlsplit(location).query).get("state", [""])[0]
    source = request.POST if request.method == "POST" else request.GET
    params = {name: source[name] for name in LOGIN_PARAMS if source.get(name) and len(source[name]) <= MAX_PARAM}
    if state:
        cache.set(_key(state), params, STATE_LIFETIME)


def login_again(state: str) -> tuple[str, list[str]]:
    """The login restarted from scratch, for a state the tool issued and has not answered yet, with the origins
    of the registered platform that started it (which may frame the page offering it); ("", []) otherwise."""
    if not state or len(state) > 200:
        return "", []
    params = cache.get(_key(state))
    cache.delete(_key(state))
    if not params or not params.get("iss"):
        return "", []
    platforms = LtiTool.objects.filter(issuer=params["iss"], is_active=True)
    if params.get("client_id"):
        platforms = platforms.filter(client_id=params["client_id"])
    platform = platforms.first()
    if platform is None:
        return "", []
    return f"{reverse('lti:login')}?{urlencode(params)}", origins_of(platform)
