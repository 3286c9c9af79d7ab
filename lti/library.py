"""The one place the tool builds `pylti1p3` objects: the registrations come from the database, launch state
(state, nonce, the launch itself) lives in Django's cache, and every call to a platform has a timeout.

Launch state is kept in the cache, not in Django's session, because the platform's POST to the launch URL is
cross-site: a `SameSite=Lax` session cookie does not come with it. On HTTPS the library pairs the cache entries
with its own `lti1p3-session-id` cookie (`SameSite=None; Secure`), so the site's session cookie keeps its
defaults. Several web processes need a shared cache (`CACHES`, e.g. Redis) for a login and its launch to meet.

The library parses the id_token's header and claims with a plain `json.loads` and then pickles the claims into
the cache, both recursively: `BoundedMessageLaunch` first bounds the token's length and reads both parts with
`input_limits.loads`, so even a correctly signed token built to break them is refused in words (a 400).
"""
from __future__ import annotations

import requests
from pylti1p3.contrib.django import DjangoCacheDataStorage, DjangoMessageLaunch, DjangoOIDCLogin
from pylti1p3.contrib.django.lti1p3_tool_config import DjangoDbToolConf
from pylti1p3.exception import LtiException

from courseapp.input_limits import InputTooComplex, loads

from . import platform_urls

PLATFORM_TIMEOUT = 5  # seconds, for each call to a platform (its JWKS, token and score endpoints)
PLATFORM_KEYS_CACHE = 300  # seconds a platform's JWKS is reused before it is fetched again
LAUNCH_LIFETIME = 3600  # seconds a launch stays restorable (the deep-linking picker posts back within it)
# Real id_tokens are a few kilobytes (a deep-linking request with its settings stays under 10); a token is
# decoded, verified and cached whole, so one of hundreds of kilobytes is refused before any of that.
MAX_ID_TOKEN_CHARS = 64 * 1024


class PlatformSession(requests.Session):
    """A requests session whose every call gives up after PLATFORM_TIMEOUT seconds."""

    def request(self, *args, **kwargs):
        kwargs.setdefault("timeout", PLATFORM_TIMEOUT)
        return super().request(*args, **kwargs)


class BoundedMessageLaunch(DjangoMessageLaunch):
    """The library's launch, with its id_token bounded before the library parses it (see the module's doc)."""

    def validate_jwt_format(self) -> "BoundedMessageLaunch":
        id_token = self._get_id_token()
        if len(id_token) > MAX_ID_TOKEN_CHARS:
            raise LtiException(f"the id_token is {len(id_token):,} characters long: at most "
                               f"{MAX_ID_TOKEN_CHARS:,} characters are read")
        for part, encoded in zip(("header", "claims"), id_token.split(".")[:2]):
            try:
                loads(self.urlsafe_b64decode(encoded), max_bytes=MAX_ID_TOKEN_CHARS)
            except InputTooComplex as error:
                raise LtiException(f"the id_token's {part} cannot be read: {error}") from None
            except ValueError:  # not base64 or not JSON: the library's own check says so, in its words
                break
        return super().validate_jwt_format()


class CheckedToolConf(DjangoDbToolConf):
    """The registrations in the database, each refused at use while it names an http:// endpoint
    (platform_urls.py): a key set or token fetched over plain HTTP could be swapped on the way."""

    def get_lti_tool(self, iss, client_id):
        platform = super().get_lti_tool(iss, client_id)
        platform_urls.check(platform)
        return platform


def tool_conf() -> DjangoDbToolConf:
    return CheckedToolConf()


def storage() -> DjangoCacheDataStorage:
    return DjangoCacheDataStorage(cache_name="default")


def oidc_login(request) -> DjangoOIDCLogin:
    return DjangoOIDCLogin(request, tool_conf(), launch_data_storage=storage())


def message_launch(request) -> BoundedMessageLaunch:
    data = storage()
    launch = BoundedMessageLaunch(request, tool_conf(), launch_data_storage=data, requests_session=PlatformSession())
    launch.set_public_key_caching(data, cache_lifetime=PLATFORM_KEYS_CACHE)
    launch.set_launch_data_lifetime(LAUNCH_LIFETIME)
    return launch


def restored_launch(request, launch_id: str) -> BoundedMessageLaunch:
    """A launch validated earlier (by `message_launch`), from the cache; LtiException when it is gone."""
    return BoundedMessageLaunch.from_cache(launch_id, request, tool_conf(), launch_data_storage=storage(),
                                         requests_session=PlatformSession())


def consume_nonce(launch: DjangoMessageLaunch) -> None:
    """Forget the launch's nonce, so the same id_token posted again is refused ("Invalid Nonce")."""
    nonce = launch.get_launch_data().get("nonce")
    if nonce:
        launch.get_session_service().data_storage.set_value(f"lti1p3-nonce-{nonce}", None, 1)
