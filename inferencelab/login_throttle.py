"""Sign-in and sign-up throttles that a visitor cannot turn against other users.

Sign-in (django-axes, configured in settings.py): failures are counted per (account, client address) pair, and
the pair's delays grow. The `LOGIN_MAX_FAILURES`-th failure locks the pair for `LOGIN_LOCKOUT_SECONDS`; each
failure after that (once the lock is over: a locked pair's password is not even checked, and its attempts count
nothing) locks it twice as long as the one before, up to `LOGIN_LOCKOUT_MAX_SECONDS`. A pair's failures are
remembered for `LOGIN_FAILURE_MEMORY` after its latest one, and forgotten at its first correct sign-in. So a
guesser gets a handful of tries a day instead of `LOGIN_MAX_FAILURES` every few minutes, while a student who
mistyped waits a minute. Only the pair is locked: the same account from another address, and other accounts
from the same address (a classroom behind one NAT), sign in as usual. The address is
inferencelab.client_address's, so a forged X-Forwarded-For changes nothing.

axes decides "locked" as `failures >= AXES_FAILURE_LIMIT` among the attempts newer than `AXES_COOLOFF_TIME`, one
window for every pair: the cool-off is the memory (the same for all, so axes' clean-up of expired attempts never
forgets another pair's count early), and the limit is where the growing lock lives (`failure_limit`).

Sign-up: at most `SIGNUP_MAX_PER_ADDRESS` accounts per client address in `SIGNUP_WINDOW` seconds
(`address_quota.SIGNUP`, counted in Django's cache: one Daphne process by default; with several, point CACHES at
Redis).
"""
from __future__ import annotations

import math
from datetime import datetime, timedelta

from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.db.models import Max, Sum
from django.shortcuts import render
from django.utils import timezone


def lockout_seconds(failures: int) -> int:
    """How long a pair with this many failures is locked after its latest one (0: not locked)."""
    extra = failures - int(settings.LOGIN_MAX_FAILURES)
    if extra < 0:
        return 0
    return min(int(settings.LOGIN_LOCKOUT_MAX_SECONDS), int(settings.LOGIN_LOCKOUT_SECONDS) * 2 ** min(extra, 40))


def _pair_failures(request, credentials) -> tuple[int, datetime | None]:
    """(failures, time of the latest) of this request's (account, address) pair within the memory, read through
    axes' own handler (the attempts it counts: every user agent of the pair together)."""
    failures, latest = 0, None
    for attempts in AxesProxyHandler.get_implementation().get_user_attempts(request, credentials):
        found = attempts.aggregate(n=Sum("failures_since_start"), latest=Max("attempt_time"))
        if (found["n"] or 0) > failures:
            failures, latest = found["n"], found["latest"]
    return failures, latest


def lockout_left(request, credentials=None) -> float:
    """Seconds until this request's pair may try again; 0 when it may now."""
    AxesProxyHandler.update_request(request)  # axes' address and time for this request
    failures, latest = _pair_failures(request, credentials)
    if latest is None:
        return 0.0
    now = getattr(request, "axes_attempt_time", None) or timezone.now()
    return max(0.0, lockout_seconds(failures) - (now - latest).total_seconds())


def failure_limit(request, credentials) -> int:  # AXES_FAILURE_LIMIT
    """The failure count at which axes locks the pair now: LOGIN_MAX_FAILURES (which its count has reached) while
    its latest failure is younger than its lockout, else one more than its count (it may try again)."""
    if lockout_left(request, credentials) > 0:
        return int(settings.LOGIN_MAX_FAILURES)
    return max(int(settings.LOGIN_MAX_FAILURES), _pair_failures(request, credentials)[0] + 1)


def cool_off(request) -> timedelta:  # AXES_COOLOFF_TIME: how long a pair's failures are remembered
    return timedelta(seconds=max(int(settings.LOGIN_FAILURE_MEMORY), int(settings.LOGIN_LOCKOUT_MAX_SECONDS)))


def wait_message(seconds: int) -> str:
    if seconds < 90:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"about {minutes} minutes"
    hours = round(minutes / 60)
    return f"about {hours} hours"


def lockout_response(request, *extra):  # AXES_LOCKOUT_CALLABLE (axes passes different extras sync and async)
    """The sign-in page again, with 429, a Retry-After (what is left of this pair's lock) and what to do; the
    password was not checked."""
    credentials = next((e for e in extra if isinstance(e, dict)), None)
    wait = max(1, math.ceil(lockout_left(request, credentials)))
    message = (f"Too many failed sign-ins for this account from your network address. Try again in "
               f"{wait_message(wait)}, or sign in from another network.")
    response = render(request, "registration/login.html",
                      {"form": AuthenticationForm(request), "throttle_message": message,
                       "next": request.POST.get("next", "")}, status=429)
    response["Retry-After"] = str(wait)
    return response
