"""The account page's API keys (/account/api-keys/): make one (shown once), see when each was last used, revoke."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from .keys import MAX_ACTIVE_KEYS, TooManyKeys, create_key, revoke
from .models import ApiKey


@login_required
@require_http_methods(["GET", "POST"])
def api_keys(request):
    new_key = None
    if request.method == "POST":
        try:
            _, new_key = create_key(request.user, request.POST.get("name", ""))
        except TooManyKeys as exc:
            messages.error(request, str(exc))
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
