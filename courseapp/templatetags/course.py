from django import template
from django.urls import reverse

from courseapp.models import Module

register = template.Library()


@register.simple_tag(takes_context=True)
def glossary_url(context) -> str:
    """The glossary module's URL when a module with slug "glossary" is visible, else ""."""
    request = context.get("request")
    if request is None:
        return ""
    cache = getattr(request, "_courseapp_glossary", None)
    if cache is None:
        exists = Module.objects.visible_to(request.user).filter(slug="glossary").exists()
        cache = reverse("courseapp:module", args=["glossary"]) if exists else ""
        request._courseapp_glossary = cache
    return cache


@register.filter
def clock(seconds) -> str:
    """Seconds → m:ss (or h:mm:ss)."""
    try:
        total = int(round(float(seconds)))
    except (TypeError, ValueError):
        return "0:00"
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
