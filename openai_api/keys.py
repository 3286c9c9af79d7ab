"""Making, finding and revoking API keys. A key is `il-` + 43 URL-safe characters (256 random bits); the database
keeps its sha256 and its first characters only, so a leaked database gives nobody a usable key."""
from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.utils import timezone

from .models import ApiKey

KEY_PREFIX = "il-"
MAX_ACTIVE_KEYS = 10  # per user: enough for a laptop, a notebook and a script; a list a person can still read
SHOWN_CHARS = 10  # "il-" and 7 characters: tells one's keys apart, far too short to guess the rest
LAST_USED_EVERY = timedelta(minutes=1)  # last_used_at is rewritten at most this often (one write per request would
# serialise every request of a busy key on the database)


class TooManyKeys(Exception):
    pass


def digest(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def create_key(user, name: str = "") -> tuple[ApiKey, str]:
    """A new key for `user`: (the stored row, the key itself, to show once). TooManyKeys past MAX_ACTIVE_KEYS."""
    if ApiKey.objects.filter(user=user, revoked_at__isnull=True).count() >= MAX_ACTIVE_KEYS:
        raise TooManyKeys(f"at most {MAX_ACTIVE_KEYS} active keys per account: revoke one first")
    raw = KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(user=user, name=name.strip()[:80], prefix=raw[:SHOWN_CHARS], digest=digest(raw))
    return key, raw


def key_for(raw: str) -> ApiKey | None:
    """The active key `raw` names, with its user (an active account), or None; notes when it was last used."""
    if not raw.startswith(KEY_PREFIX) or len(raw) > 200:
        return None
    key = (ApiKey.objects.select_related("user")
           .filter(digest=digest(raw), revoked_at__isnull=True, user__is_active=True).first())
    if key is not None:
        now = timezone.now()
        if key.last_used_at is None or now - key.last_used_at > LAST_USED_EVERY:
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return key


def revoke(user, key_id: int) -> bool:
    """Revoke one of `user`'s keys; False when it is not theirs or already revoked."""
    return ApiKey.objects.filter(pk=key_id, user=user, revoked_at__isnull=True).update(revoked_at=timezone.now()) > 0
