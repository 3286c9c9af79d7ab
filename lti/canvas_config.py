"""The tool's configuration as Canvas reads it (`/lti/canvas.json`): a Canvas admin picks *Developer Keys → + LTI
Key → Method: Enter URL*, pastes this URL, and Canvas fills in every field of docs/lti.md's manual entry (login
and launch URLs, the JWKS URL, the grade and class-list services, the deep-linking placements, privacy level).

Every URL is this site's as the request reached it (scheme, host and port: behind nginx, `Host $http_host` and
`X-Forwarded-Proto`), so serve it over HTTPS: Canvas refuses http:// tool URLs.
"""
from __future__ import annotations

from urllib.parse import urlsplit

from django.http import JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_GET

TITLE = "Inference Lab"
DESCRIPTION = "An interactive course on LLM inference: lessons with live demos, quizzes, labs and exercises."
SCOPES = [
    "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",  # the labs' and exercises' own grade columns
    "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly",  # their end dates (lti/due_dates.py)
    "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly",
    "https://purl.imsglobal.org/spec/lti-ags/scope/score",  # the quiz, lab and exercise scores
    "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly",  # the class list (lti/roster.py)
]


def configuration(request) -> dict:
    launch = request.build_absolute_uri(reverse("lti:launch"))
    picker = {"message_type": "LtiDeepLinkingRequest", "target_link_uri": launch}
    return {
        "title": TITLE,
        "description": DESCRIPTION,
        "oidc_initiation_url": request.build_absolute_uri(reverse("lti:login")),
        "target_link_uri": launch,
        "public_jwk_url": request.build_absolute_uri(reverse("lti:jwks")),
        "scopes": SCOPES,
        "extensions": [{
            "platform": "canvas.instructure.com",
            "domain": urlsplit(launch).netloc,
            "privacy_level": "public",  # names and e-mails reach the gradebook (the tool works without them)
            "settings": {"text": TITLE, "placements": [
                {"placement": "link_selection", "text": TITLE, **picker},
                {"placement": "assignment_selection", "text": TITLE, **picker},
            ]},
        }],
    }


@require_GET
def canvas_json(request):
    return JsonResponse(configuration(request), json_dumps_params={"indent": 2})
