"""The account page's API keys (/account/api-keys/): make one (shown once), see when each was last used, revoke."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from .keys import MAX_ACTIVE_KEYS, TooManyKeys, create_key, revoke
from .models import ApiKey


NEW_KEY = "openai_api_new_key"  # the session's copy of a key just made, until the page after the redirect shows it


@login_required
@require_http_methods(["GET", "POST"])
def api_keys(request):
    if request.method == "POST":  # then a redirect, so that reloading the page shows it, not makes another key
        try:
            request.session[NEW_KEY] = create_key(request.user, request.POST.get("name", ""))[1]
        except TooManyKeys as exc:
            messages.error(request, str(exc))
        return redirect("openai_api:keys")
    new_key = request.session.pop(NEW_KEY, None)  # shown once
    keys = ApiKey.objects.filter(user=request.user, revoked_at__isnull=True)
    response = render(request, "openai_api/keys.html", {"keys": keys, "new_key": new_key,
                                                        "max_keys": MAX_ACTIVE_KEYS})
    response["Cache-Control"] = "no-store"  # the page may show a new key: no cache keeps it
    return response


@login_required
@require_POST
def revoke_key(request, key_id: int):
    if revoke(request.user, key_id):
        messages.success(request, "The key is revoked: requests that name it now get 401.")
    return redirect("openai_api:keys")
