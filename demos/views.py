from __future__ import annotations

from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from .embed import render_embed
from .models import Run
from .registry import DEMOS, DemoParamError, get_spec
from .identity import ensure_token, owners_for_request


def _ensure_session(request) -> None:
    # The websocket identifies an anonymous visitor by the session cookie (resume, ownership,
    # rate limits), so make sure there is one before the page's socket connects.
    ensure_token(request.session)
    if not request.session.session_key:
        request.session.save()


@require_GET
def demo_index(request):
    _ensure_session(request)
    return render(request, "demos/index.html", {"demos": sorted(DEMOS.values(), key=lambda d: d.title)})


@require_GET
def demo_page(request, name: str):
    try:
        spec = get_spec(name)
    except DemoParamError:
        raise Http404(f"no demo named {name!r}")
    _ensure_session(request)
    embed = render_embed(spec.name, {}, standalone=True)
    return render(request, "demos/demo_page.html", {"spec": spec, "embed": mark_safe(embed)})


@require_GET
def dashboard(request):
    _ensure_session(request)
    return render(request, "demos/dashboard.html", {})


@require_GET
def run_events(request, run_id):
    """A finished or running run's stored trace as JSON (owner only), for download and debugging."""
    _ensure_session(request)
    run = Run.objects.filter(pk=run_id, owner__in=owners_for_request(request)).select_related("replay_of").first()
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
