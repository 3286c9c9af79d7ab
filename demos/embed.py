"""Embedding a live demo inside a lesson: `render_embed(name, props) -> str` (HTML).

The course renderer calls it for `:::{demo} NAME` directives. Props are the demo's parameters
(validated with the registry, so a bad directive fails at authoring time with a DemoParamError).
The returned HTML is self-contained: a mount point plus an ES module import of the demo's
script; the module loads the vendored Plotly bundle itself when the page has not.
"""
from __future__ import annotations

import json
import uuid

from django.template.loader import render_to_string
from django.templatetags.static import static
from django.urls import reverse

from .registry import get_spec, validate


def _script_safe_json(value) -> str:
    """JSON safe to place inside <script>: no '<', '>' or '&' that could close the element."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_embed(name: str, props: dict | None = None, *, standalone: bool = False, shared_run: str | None = None) -> str:
    """`shared_run`: the URL of a finished run's stored trace (a share link): the demo draws it read-only."""
    spec = get_spec(name)
    params = validate(name, props or {})
    dom_id = f"demo-{spec.name}-{uuid.uuid4().hex[:8]}"
    config = {
        "demo": spec.name,
        "title": spec.title,
        "params": params,
        "spec": spec.describe(),
        "wsPath": "/ws/demos/",
        "plotlyUrl": static("vendor/plotly.min.js"),
        "standalone": standalone,
        "myRunsUrl": reverse("demos:my_runs"),
        "shareUrlTemplate": reverse("demos:shared_run", args=["__run__"]),
        "runDataUrlTemplate": reverse("demos:shared_run_json", args=["__run__"]),
    }
    if shared_run:
        config["sharedRun"] = shared_run
    return render_to_string(
        "demos/embed.html",
        {
            "spec": spec,
            "dom_id": dom_id,
            "config_json": _script_safe_json(config),
            "module_url": static(spec.module),
            "loader_url": static("js/demo-embed.js"),
        },
    )
