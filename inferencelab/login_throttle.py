"""Login with a failure throttle: guessing passwords costs a wait, per account and per client address.

After `LOGIN_MAX_FAILURES` failed sign-ins for one username, or from one address, within
`LOGIN_FAILURE_WINDOW` seconds, further attempts are refused with 429 (the form says how long to wait)
without checking the password. A successful sign-in clears the username's count. Counts live in
Django's cache: one Daphne process by default; with several, point CACHES at Redis.
"""
from __future__ import annotations

import hashlib
import time

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache


def _keys(request) -> list[str]:
    username = request.POST.get("username", "").strip().lower()
    address = request.META.get("REMOTE_ADDR", "")
    return [f"login-fail:{kind}:{hashlib.sha256(value.encode()).hexdigest()[:32]}"
            for kind, value in (("user", username), ("addr", address)) if value]


def _blocked_for(keys: list[str]) -> int:
    """Seconds until the oldest counted failure expires, or 0 when an attempt is allowed."""
    now = time.time()
    waits = [int(entry[1] - now) + 1 for entry in cache.get_many(keys).values()
             if entry[0] >= settings.LOGIN_MAX_FAILURES and entry[1] > now]
    return max(waits, default=0)


def _record_failure(keys: list[str]) -> None:
    now, window = time.time(), settings.LOGIN_FAILURE_WINDOW
    for key in keys:
        count, expires = cache.get(key, (0, now + window))
        cache.set(key, (count + 1, expires), timeout=max(1, int(expires - now)))


class ThrottledLoginView(auth_views.LoginView):
    def post(self, request, *args, **kwargs):
        keys = _keys(request)
        wait = _blocked_for(keys)
        if wait:
            minutes = max(1, round(wait / 60))
            message = f"Too many failed sign-ins. Try again in about {minutes} minute{'s' if minutes != 1 else ''}."
            form = self.get_form_class()(request)  # unbound: the password is not even checked
            context = self.get_context_data(form=form, throttle_message=message)
            response = self.render_to_response(context, status=429)
            response["Retry-After"] = str(wait)
            return response
        response = super().post(request, *args, **kwargs)
        if response.status_code == 302:  # signed in: this account's failures are forgiven
            cache.delete_many([key for key in keys if key.startswith("login-fail:user:")])
        else:
            _record_failure(keys)
        return response
