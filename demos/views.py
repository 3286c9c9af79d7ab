from __future__ import annotations

import re

from django.conf import settings
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from inferencelab.address_quota import VISITOR_SESSION

from .embed import render_embed
from .models import Run
from .registry import DEMOS, DemoParamError, get_spec
from .identity import TOKEN_KEY, ensure_token, owners_for_request

# Page views never create a session: a visitor gets one at their first run (`visitor`, below), so crawlers,
# link previews and readers who only look leave no row behind.


@csrf_exempt  # it only gives the caller's own browser an anonymous session with a fresh token: nothing else changes
@require_POST
def visitor(request):
    """The first run of an anonymous visitor: a session holding their owner token, so the websocket that
    connects next (its handshake carries the cookie) owns the run, and a reload or another tab can resume it.
    `created` says whether the token is new (the page's socket then reconnects to carry it)."""
    if request.user.is_authenticated:
        return JsonResponse({"created": False})
    created = not request.session.session_key or not request.session.get(TOKEN_KEY)
    if created and (wait := VISITOR_SESSION.wait(request)):
        # A flood from one address makes no rows; the page's runs then go out as the address's (docs/protocol.md).
        response = JsonResponse({"created": False, "error": "too_many_visitors", "retry_after": wait}, status=429)
        response["Retry-After"] = str(wait)
        return response
    if created:
        VISITOR_SESSION.record(request)
    ensure_token(request.session)
    if not request.session.session_key:
        request.session.save()
    return JsonResponse({"created": created})


def _known_owners(request) -> tuple[str, ...]:
    """The owners whose runs this request may read, creating nothing: a visitor who never ran a demo has none."""
    if not request.user.is_authenticated and not request.session.get(TOKEN_KEY):
        return ()
    return owners_for_request(request)


@require_GET
def demo_index(request):
    return render(request, "demos/index.html", {"demos": sorted(DEMOS.values(), key=lambda d: d.title)})


@require_GET
def demo_page(request, name: str):
    try:
        spec = get_spec(name)
    except DemoParamError:
        raise Http404(f"no demo named {name!r}")
    if name not in DEMOS:  # started from elsewhere (an exercise's live run): it has no page of its own
        raise Http404(f"no demo named {name!r}")
    embed = render_embed(spec.name, {}, standalone=True)
    return render(request, "demos/demo_page.html", {"spec": spec, "embed": mark_safe(embed)})


@require_GET
def dashboard(request):
    return render(request, "demos/dashboard.html", {"demo_queue": settings.DEMO_TASK_QUEUE})


@require_GET
def run_events(request, run_id):
    """A finished or running run's stored trace as JSON (owner only), for download and debugging."""
    run = Run.objects.filter(pk=run_id, owner__in=_known_owners(request)).select_related("replay_of").first()
    if run is None:
        raise Http404("no such run")
    events = list(run.event_source.events.order_by("seq").values("seq", "t", "event"))
    return JsonResponse(
        {
            "run_id": str(run.id),
            "demo": run.demo,
            "params": run.params,
            "status": run.status,
            "replayed": bool(run.replay_of_id),
            "summary": run.summary,
            "events": events,
        }
    )


SHARE_ID = re.compile(r"[A-Za-z0-9_-]{8,32}")  # what demos.models.new_share_id makes (anything else: 404)
MY_RUNS_LIMIT = 10


def _shared_run(share_id: str) -> Run:
    """The finished run a share link names, or 404 (unknown, malformed, unfinished or of a removed demo)."""
    if not isinstance(share_id, str) or not SHARE_ID.fullmatch(share_id):
        raise Http404("no such run")
    run = Run.objects.filter(share_id=share_id, status=Run.Status.DONE).select_related("replay_of").first()
    if run is None or run.demo not in DEMOS:
        raise Http404("no such run")
    return run


def _share_urls(run: Run) -> dict:
    return {"share_url": reverse("demos:shared_run", args=[run.share_id]),
            "data_url": reverse("demos:shared_run_json", args=[run.share_id])}


@require_GET
def shared_run(request, share_id: str):
    """A share link: the demo's page drawing a finished run's stored events, read-only (no model runs)."""
    run = _shared_run(share_id)
    spec = get_spec(run.demo)
    try:
        embed = render_embed(spec.name, run.params, standalone=True, shared_run=_share_urls(run)["data_url"])
    except DemoParamError:  # the demo's limits changed since: the form shows its defaults, the charts the run
        embed = render_embed(spec.name, {}, standalone=True, shared_run=_share_urls(run)["data_url"])
    return render(request, "demos/shared_run.html", {"spec": spec, "header": run.public_header(),
                                                     "measured": run.event_source.started_at
                                                     or run.event_source.created_at,
                                                     "embed": mark_safe(embed)})


@require_GET
def shared_run_json(request, share_id: str):
    """A shared run's stored trace (anyone with the link): what the read-only page draws. Only the share id
    names the run: no internal id, no worker host or pid."""
    run = _shared_run(share_id)
    events = list(run.event_source.events.order_by("seq").values_list("event", flat=True))
    return JsonResponse({"share_id": run.share_id, "demo": run.demo, "params": run.params, "status": run.status,
                         "summary": run.public_summary(), "header": run.public_header(), "events": events,
                         **_share_urls(run)})


@require_GET
def my_runs(request):
    """This visitor's latest finished runs of one demo (`?demo=`), newest first: what a page can add to its
    comparison from the server (each with its share link and header, not its events)."""
    try:
        spec = get_spec(request.GET.get("demo"))
    except DemoParamError:
        raise Http404("no such demo")
    runs = (Run.objects.filter(owner__in=_known_owners(request), demo=spec.name, status=Run.Status.DONE)
            .select_related("replay_of").order_by("-finished_at")[:MY_RUNS_LIMIT])
    return JsonResponse({"demo": spec.name, "runs": [
        {"share_id": r.share_id, "params": r.params, "finished_at": r.finished_at.isoformat() if r.finished_at else None,
         "header": r.header(), **_share_urls(r)} for r in runs]})
