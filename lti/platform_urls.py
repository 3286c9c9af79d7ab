"""A platform's endpoints must be reached over HTTPS: its JWKS (the keys its launches are checked against), its
token endpoint (the access tokens grades are posted with) and its login (authorization) endpoint. Over plain
http:// anyone on the network between could swap the keys and sign launches as any user.

http:// is accepted only with settings.DEBUG on (a developer's LMS on their own machine), or for a loopback
address (127.0.0.1, ::1, localhost: no network lies between). The check runs where a registration is made (the
`lti_add_platform` command, the admin's form) and again each time one is used (`library.tool_conf`), so a
registration stored before, or edited in the database, is refused too.
"""
from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings
from pylti1p3.exception import LtiException

# The registration's URL fields (pylti1p3's LtiTool) and what an LMS's configuration page calls them.
URL_FIELDS = {"auth_login_url": "login (authorization) URL", "auth_token_url": "token URL",
              "key_set_url": "JWKS (public keyset) URL"}
WHY = ("a platform's URLs must start with https:// (its keys and tokens travel over them; over plain http:// "
       "anyone on the network could swap the keys)")


class InsecurePlatform(LtiException):
    """A registration names an http:// endpoint where HTTPS is required."""


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def allowed(url: str) -> bool:
    """Whether the tool may call `url` (an empty URL is the library's to refuse, or unused)."""
    if not url:
        return True
    parts = urlsplit(url)
    if parts.scheme == "https":
        return True
    return parts.scheme == "http" and (settings.DEBUG or _loopback(parts.hostname or ""))


def problems(values: dict) -> dict[str, str]:
    """field name → what is wrong with it, for the URL fields among `values` that are not allowed."""
    return {field: f"{values[field]} is not allowed: {WHY}." for field in URL_FIELDS
            if field in values and not allowed(str(values[field] or ""))}


def check(platform) -> None:
    """Raise InsecurePlatform, in words an administrator can act on, if `platform` names an insecure URL."""
    found = problems({field: getattr(platform, field, "") for field in URL_FIELDS})
    if found:
        names = ", ".join(f"{URL_FIELDS[field]} {getattr(platform, field)}" for field in found)
        raise InsecurePlatform(f"the registration of {platform.title or platform.issuer} uses plain http:// for its "
                               f"{names}; {WHY}. An administrator must change it to https:// (manage.py "
                               "lti_add_platform, or the admin)")
