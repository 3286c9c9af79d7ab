"""The tool's endpoints: JWKS, OIDC login initiation, the launch (resource link or deep linking), and the
deep-linking picker's answer.

The login and launch requests come from the platform, cross-site, so they are exempt from Django's CSRF check:
what protects them is the library's validation (state cookie, nonce, the id_token's signature against the
platform's JWKS, its issuer/audience registration and deployment). Any failure is a 400 page saying what was
wrong and nothing is written.
"""
from __future__ import annotations

import logging
from urllib.parse import urlencode, urlsplit

from django.contrib.auth import login
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve, reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from pylti1p3.deep_link_resource import DeepLinkResource
from pylti1p3.exception import LtiException, OIDCException
from pylti1p3.lineitem import LineItem

from classes.access import is_teacher
from courseapp.models import Module

from . import library
from .accounts import admit, claim, platform_of, remember_link, teaches
from .framing import allow_framing, launched_in_frame, mark, origin_of, origins_of
from .login_again import login_again, remember_login
from .platform_urls import InsecurePlatform
from .roster import remember_service, sync_roster
from .keys import tool_key

log = logging.getLogger(__name__)
DEEP_LINKING_SETTINGS = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"


def _refused(request, reason: str, *, status: int = 400, again: str = "", again_here: bool = False,
             detail: str = ""):
    log.info("LTI request refused: %s%s", reason, f" ({detail})" if detail else "")
    return render(request, "lti/refused.html", {"reason": reason, "again": again, "again_here": again_here,
                                                "detail": detail}, status=status)


def _refused_in_frame(request, data: dict, reason: str, *, status: int):
    """A verified launch refused: the page says why inside the LMS's frame (its platform's origins may show it)."""
    return allow_framing(_refused(request, reason, status=status), origins_of(platform_of(data)))


def _state_refused(request, reason: str):
    """The launch's state is not this browser's: its login was started in another window or browser, or so long
    ago that it expired (or, inside the LMS's frame, the browser refused the state cookie). Inside a frame, for a
    login this tool started and has not answered, that is the browser refusing third-party cookies: say so, in the
    frame (which the platform that started the login may show), and offer the same login in a tab of its own,
    where the cookies are first-party. Elsewhere, say what most likely happened and offer to start that login
    again here. Either way the platform signs its user in again: no credential travels in the link."""
    again, origins = login_again(request.POST.get("state", ""))
    if launched_in_frame(request) and again:
        response = _refused(request, "Your browser does not allow this site's cookies inside the LMS's frame, "
                                     "so the lesson cannot open here. Open it in a new tab instead: you will "
                                     "be signed in there.", again=again, detail=reason)
        return allow_framing(response, origins)
    return _refused(request, "This launch has expired, or it was opened in another window or browser than the one "
                             "that started it, so it cannot be verified here. Start again"
                             + (": you will be signed in." if again else " from the activity's link in your LMS."),
                    again=again, again_here=True, detail=reason)


@require_GET
def jwks(request):
    """This install's public key as a JSON Web Key Set: what platforms verify the tool's signatures with."""
    tool_key()
    return JsonResponse(library.tool_conf().get_jwks())


@csrf_exempt
@require_http_methods(["GET", "POST"])
def login_initiation(request):
    """OIDC third-party login: the platform names itself; the tool answers with a redirect to the platform's
    authorization endpoint carrying a fresh state (cookie) and nonce (cache)."""
    try:
        response = library.oidc_login(request).redirect(request.build_absolute_uri(reverse("lti:launch")))
    except InsecurePlatform as error:
        return _refused(request, f"This LMS cannot sign in here: {error}.")
    except (LtiException, OIDCException) as error:  # the library's two families: neither subclasses the other
        return _refused(request, f"The login request could not be matched to a registered platform: {error}")
    remember_login(request, response["Location"])
    return response


def _module_slug(data: dict) -> str:
    """The module a resource link opens: its `module` custom parameter, else the module page it targets."""
    custom = claim(data, "custom", {})
    if isinstance(custom, dict) and custom.get("module"):
        return str(custom["module"])
    path = urlsplit(str(claim(data, "target_link_uri", ""))).path
    try:
        match = resolve(path)
    except Resolver404:
        return ""
    return match.kwargs.get("slug", "") if match.view_name == "courseapp:module" else ""


def _teaches(launch) -> bool:
    return teaches(claim(launch.get_launch_data(), "roles", []))


@csrf_exempt
@require_POST
def launch(request):
    try:
        message = library.message_launch(request)  # refuses a launch without the browser's launch cookie
        data = message.get_launch_data()  # validates everything, or raises
    except LtiException as error:
        reason = str(error).replace("Missing %s cookie", "Missing cookie")  # the library's own typo
        if "cookie" in reason or "State not found" in reason:
            return _state_refused(request, reason)
        return _refused(request, f"The launch could not be verified: {reason}")
    library.consume_nonce(message)
    if message.is_deep_link_launch():
        return _deep_link_picker(request, message)
    if not message.is_resource_launch():
        return _refused_in_frame(request, data, "This tool accepts resource-link and deep-linking launches only.",
                                 status=400)
    module = None
    slug = _module_slug(data)
    if slug:
        module = Module.objects.published().filter(slug=slug).first()
        if module is None:
            return _refused_in_frame(request, data, f"The link names the module “{slug}”, which is not published "
                                                    "here.", status=404)
    teacher = _teaches(message)
    user, context = admit(data, teacher=teacher)
    if context is not None and module is not None:
        remember_link(data, context, module, None if teacher or is_teacher(user) else user)
    if context is not None:
        remember_service(data, context)
        if teacher and context.memberships_url:
            sync_roster(request, context, keep=user)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    mark(request, platform_of(data))  # after login(), which starts the session afresh
    return redirect(_landing(module, context, teacher=teacher))


def _landing(module, context, *, teacher: bool) -> str:
    """A teacher lands on their class's gradebook (naming the module the link opens), a student on the module."""
    if teacher and context is not None:
        gradebook = reverse("classes:gradebook", args=[context.cohort_id])
        return f"{gradebook}?{urlencode({'opened': module.slug})}" if module else gradebook
    return module.get_absolute_url() if module else reverse("courseapp:index")


def _framed_by_platform(response, return_url: str):
    """Let the platform (only it) frame this page and receive its form: the picker opens in the LMS's dialog.
    The site's policy otherwise applies unchanged."""
    origin = origin_of(return_url)
    return allow_framing(response, [origin] if origin else [], form_action=True)


def _deep_link_picker(request, launch):
    if not _teaches(launch):
        return _refused_in_frame(request, launch.get_launch_data(), "Only an instructor can add modules from the LMS.",
                                 status=403)
    settings = launch.get_launch_data().get(DEEP_LINKING_SETTINGS) or {}
    response = render(request, "lti/deep_link_pick.html", {
        "launch_id": launch.get_launch_id(),
        "modules": Module.objects.published().in_course_order(),
        "multiple": str(settings.get("accept_multiple", "true")).lower() != "false",
    })
    return _framed_by_platform(response, settings.get("deep_link_return_url", ""))


def _resource(request, module: Module) -> DeepLinkResource:
    resource = (DeepLinkResource().set_url(request.build_absolute_uri(module.get_absolute_url()))
                .set_title(module.title).set_custom_params({"module": module.slug}))
    questions = module.questions.count()
    if questions:  # a grade column for its quiz, so launches from the link carry the line item
        resource.set_lineitem(LineItem().set_score_maximum(questions).set_label(module.title)
                              .set_resource_id(module.slug))
    return resource


@csrf_exempt  # the picker is shown inside the LMS; the launch id (only in this page) and its cache entry guard it
@require_POST
def deep_link_return(request):
    try:
        launch = library.restored_launch(request, request.POST.get("launch_id", ""))
    except LtiException:
        return _refused(request, "This module picker has expired: open it again from the LMS.")
    if not launch.is_deep_link_launch() or not _teaches(launch):
        return _refused(request, "This launch cannot add modules.", status=403)
    slugs = [] if request.POST.get("cancel") else request.POST.getlist("module")
    modules = list(Module.objects.published().in_course_order().filter(slug__in=slugs))
    if not request.POST.get("cancel") and (not modules or len(modules) != len(set(slugs))):
        raise Http404("Pick at least one published module.")
    # Cancel: a response with no content items, so the platform closes its dialog having added nothing.
    deep_link = launch.get_deep_link()
    settings = launch.get_launch_data()[DEEP_LINKING_SETTINGS]  # the library checked it is there
    response = render(request, "lti/deep_link_return.html", {
        "return_url": settings["deep_link_return_url"],
        "jwt": deep_link.get_response_jwt([_resource(request, module) for module in modules]),
        "modules": modules,
    })
    return _framed_by_platform(response, settings["deep_link_return_url"])
