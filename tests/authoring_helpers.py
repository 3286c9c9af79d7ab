"""Saving through the real module editor, for the authoring and search tests."""
from __future__ import annotations

import re

from django.urls import reverse


def save_live(client, slug: str, data: dict):
    """Save through the editor; a published module first shows its diff, which the author confirms."""
    url = reverse("authoring:edit", args=[slug])
    response = client.post(url, data)
    if response.status_code == 200 and "confirm_live" in response.content.decode():
        digest = re.search(r'name="confirm_live" value="([0-9a-f]+)"', response.content.decode()).group(1)
        response = client.post(url, {**data, "confirm_live": digest})
    return response


def editor_data(module, source: str, **fields) -> dict:
    """The editor form of `module` as a browser posts it, with `source` as the lesson."""
    return {"title": module.title, "short_title": module.short_title, "slug": module.slug,
            "track": module.track_id, "order": module.order, "prerequisites": ", ".join(module.prerequisites),
            "summary": module.summary, "source": source, "action": "save", **fields}


def confirmed(client, url: str, data: dict | None = None, field: str = "confirm", **kwargs):
    """POST to a step that first shows what it will change and asks (restore, zip import, unpublish), then
    confirm what it showed, as an author pressing the button would."""
    response = client.post(url, data or {})
    page = response.content.decode()
    if response.status_code == 200 and f'name="{field}"' in page:
        digest = re.search(rf'name="{field}" value="([^"]+)"', page).group(1)
        response = client.post(url, {**(data or {}), field: digest}, **kwargs)
    return response


def confirm_import(client):
    """Confirm the import waiting for this session, as shown on its review page."""
    review = client.get(reverse("authoring:import_review"))
    digest = re.search(r'name="confirm" value="([^"]+)"', review.content.decode()).group(1)
    return client.post(reverse("authoring:import_confirm"), {"confirm": digest})
