"""Lessons inside the LMS's frame: the pages of a session that an LTI launch began may be framed by that
platform's registered origins, and by no one else.

Invariants:
- A session is framable only after a verified resource-link launch marks it (`mark`), and only by the origins of
  the platform that launched it (`origins_of`: the registration's issuer and login-URL origins plus those its
  `Embedding` names). Every other response keeps the site's `X-Frame-Options: DENY` and `frame-ancestors
  'none'`; so does the admin, whoever is signed in. Signing out (or in as someone else) flushes the mark.
- The site's cookies (session, CSRF, messages) become `SameSite=None; Secure` only where a frame needs them: a
  launch that arrived in a frame (`Sec-Fetch-Dest: iframe`) over HTTPS. A first-party visitor, or a launch opened
  in its own tab, keeps the site's `SameSite=Lax` cookies.
"""
from __future__ import annotations

from django.conf import settings
from django.utils.cache import patch_vary_headers

from .models import Embedding
from .origins import origin_of, parse_origins

SESSION_KEY = "lti_frame"  # {"origins": [...], "cross_site": bool}
FRAME_DESTINATIONS = ("iframe", "frame")
UNFRAMED_PATHS = ("/admin/",)  # never framed, whoever launched the session


def origins_of(platform) -> list[str]:
    """Every origin that may frame sessions `platform` launched, in a stable order, without repeats."""
    named = [origin_of(platform.issuer), origin_of(platform.auth_login_url)]
    embedding = Embedding.objects.filter(platform=platform).first()
    if embedding is not None:
        named += parse_origins(embedding.origins)
    return list(dict.fromkeys(o for o in named if o))


def launched_in_frame(request) -> bool:
    return request.headers.get("Sec-Fetch-Dest", "") in FRAME_DESTINATIONS


def mark(request, platform) -> None:
    """Call after `login()` on a verified launch: this session may now be framed by `platform`'s origins."""
    request.session[SESSION_KEY] = {"origins": origins_of(platform),
                                    "cross_site": launched_in_frame(request) and request.is_secure()}


def with_frame_ancestors(policy: str, origins: list[str], *, form_action: bool = False) -> str:
    """`policy` (a CSP) with `frame-ancestors 'self' <origins>` (and, if asked, `form-action 'self' <origins>`)
    in place of its own; its other directives unchanged."""
    replaced = {"frame-ancestors"} | ({"form-action"} if form_action else set())
    kept = [d.strip() for d in policy.split(";") if d.strip() and d.split()[0] not in replaced]
    allowed = " ".join(["'self'", *origins])
    return "; ".join(kept + ([f"form-action {allowed}"] if form_action else []) + [f"frame-ancestors {allowed}"])


def allow_framing(response, origins: list[str], *, form_action: bool = False):
    """Let `origins` (only they) frame this one response, under the site's policy otherwise unchanged."""
    response["Content-Security-Policy"] = with_frame_ancestors(settings.CONTENT_SECURITY_POLICY, origins,
                                                               form_action=form_action)
    response.xframe_options_exempt = True  # what Django's decorator sets: no X-Frame-Options: DENY here
    return response


class LaunchFrameMiddleware:
    """Lets the launching platform frame the pages of an LTI session, and sends that session's cookies
    cross-site where the frame needs them. Sits outside the session, CSRF and clickjacking middleware (before
    them in MIDDLEWARE), so it sees the headers and cookies they set."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        session = getattr(request, "session", None)
        frame = session.get(SESSION_KEY) if session is not None else None
        if not isinstance(frame, dict) or request.path.startswith(UNFRAMED_PATHS):
            return response
        origins = [o for o in frame.get("origins", []) if origin_of(o) == o]
        patch_vary_headers(response, ["Cookie"])  # these headers follow the session: no shared cache may mix them
        if origins and not getattr(response, "xframe_options_exempt", False):  # exempt: the view framed it itself
            response["Content-Security-Policy"] = with_frame_ancestors(response.get("Content-Security-Policy", ""),
                                                                       origins)
            if "X-Frame-Options" in response:
                del response["X-Frame-Options"]
        if frame.get("cross_site") and request.is_secure():
            for cookie in response.cookies.values():  # session, CSRF, messages: all must reach the frame
                if cookie.value:
                    cookie["samesite"] = "None"
                    cookie["secure"] = True
        return response
