"""Sign-in and sign-up throttles that a visitor cannot turn against other users.

Sign-in (django-axes, configured in settings.py): failures are counted per (account, client address) pair.
`LOGIN_MAX_FAILURES` of them lock that pair for `LOGIN_FAILURE_WINDOW` seconds, and each failure while it is
locked starts the wait again (a guesser who keeps going never gets another try). Only the pair is locked: the
same account from another address, and other accounts from the same address (a classroom behind one NAT),
sign in as usual. The address is inferencelab.client_address's, so a forged X-Forwarded-For changes nothing.

Sign-up: at most `SIGNUP_MAX_PER_ADDRESS` accounts per client address in `SIGNUP_WINDOW` seconds, counted in
Django's cache (one Daphne process by default; with several, point CACHES at Redis).
"""
from __future__ import annotations

import hashlib
import math
import time
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.shortcuts import render

from .client_address import for_request


def failure_limit(request, credentials) -> int:  # AXES_FAILURE_LIMIT
    return int(settings.LOGIN_MAX_FAILURES)


def cool_off(request) -> timedelta:  # AXES_COOLOFF_TIME
    return timedelta(seconds=int(settings.LOGIN_FAILURE_WINDOW))


def wait_message(seconds: int) -> str:
    minutes = max(1, round(seconds / 60))
    return f"about {minutes} minute{'s' if minutes != 1 else ''}"


def lockout_response(request, *_):  # AXES_LOCKOUT_CALLABLE (axes passes different extras sync and async)
    """The sign-in page again, with 429, a Retry-After and what to do; the password was not checked."""
    wait = int(settings.LOGIN_FAILURE_WINDOW)
    message = (f"Too many failed sign-ins for this account from your network address. Try again in "
               f"{wait_message(wait)}, or sign in from another network.")
    response = render(request, "registration/login.html",
                      {"form": AuthenticationForm(request), "throttle_message": message,
                       "next": request.POST.get("next", "")}, status=429)
    response["Retry-After"] = str(wait)
    return response


def _signup_key(request) -> str:
    return "signup:" + hashlib.sha256(for_request(request).encode()).hexdigest()[:32]


def signup_wait(request) -> int:
    """Seconds until this address may create another account; 0 when it may now."""
    count, expires = cache.get(_signup_key(request), (0, 0.0))
    now = time.time()
    if count >= int(settings.SIGNUP_MAX_PER_ADDRESS) and expires > now:
        return max(1, math.ceil(expires - now))
    return 0


def record_signup(request) -> None:
    key, now, window = _signup_key(request), time.time(), int(settings.SIGNUP_WINDOW)
    count, expires = cache.get(key, (0, 0.0))
    if expires <= now:
        count, expires = 0, now + window
    cache.set(key, (count + 1, expires), timeout=max(1, math.ceil(expires - now)))
