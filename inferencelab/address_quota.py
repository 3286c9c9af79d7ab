"""How many times one client address may do something that makes a row (an account, a visitor session, a reset
e-mail) in a window: a fixed window per (action, address), counted in Django's cache.

The address is inferencelab.client_address's, so a forged X-Forwarded-For changes nothing. The limits are sized
for a school behind one NAT (a whole class starts within minutes), and only bound a flood from one address.
"""
from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from .client_address import for_request


@dataclass(frozen=True)
class AddressQuota:
    action: str  # names the cache key
    limit_setting: str  # the settings holding the count per window and the window in seconds
    window_setting: str

    def _key(self, request) -> str:
        return f"quota:{self.action}:" + hashlib.sha256(for_request(request).encode()).hexdigest()[:32]

    def wait(self, request) -> int:
        """Seconds until this request's address may do it again; 0 when it may now."""
        count, expires = cache.get(self._key(request), (0, 0.0))
        now = time.time()
        if count >= int(getattr(settings, self.limit_setting)) and expires > now:
            return max(1, math.ceil(expires - now))
        return 0

    def record(self, request) -> None:
        key, now, window = self._key(request), time.time(), int(getattr(settings, self.window_setting))
        count, expires = cache.get(key, (0, 0.0))
        if expires <= now:
            count, expires = 0, now + window
        cache.set(key, (count + 1, expires), timeout=max(1, math.ceil(expires - now)))


SIGNUP = AddressQuota("signup", "SIGNUP_MAX_PER_ADDRESS", "SIGNUP_WINDOW")
VISITOR_SESSION = AddressQuota("visitor", "VISITOR_SESSIONS_PER_ADDRESS", "VISITOR_SESSION_WINDOW")
PASSWORD_RESET = AddressQuota("password-reset", "PASSWORD_RESETS_PER_ADDRESS", "PASSWORD_RESET_WINDOW")
