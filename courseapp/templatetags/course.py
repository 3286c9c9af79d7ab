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


@register.simple_tag(takes_context=True)
def demo_lessons(context, demo_name: str) -> list:
    """The visible modules that embed the live demo `demo_name`, in course order (for links back to lessons)."""
    request = context.get("request")
    if request is None:
        return []
    by_demo = getattr(request, "_courseapp_demo_lessons", None)
    if by_demo is None:
        by_demo = {}
        modules = Module.objects.visible_to(request.user).in_course_order().only("slug", "title", "short_title",
                                                                                  "demos", "track")
        for module in modules:
            for demo in module.demos:
                name = demo.get("name") if isinstance(demo, dict) else None
                if name and module not in by_demo.setdefault(name, []):
                    by_demo[name].append(module)
        request._courseapp_demo_lessons = by_demo
    return by_demo.get(demo_name, [])
