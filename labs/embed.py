"""A lab's place in the lesson: the table of configurations, the questions with their inputs and the lab's
definition as JSON, rendered on the server (so the page reads without JavaScript), which `static/js/labs/lab.js`
brings to life: run buttons, the table's numbers, the chart, checking and submitting."""
from __future__ import annotations

import json

from django.template.loader import render_to_string
from django.templatetags.static import static
from django.urls import reverse

from .metrics import SIDES, metrics_for
from .table import lab_metrics

MODULE_PLACEHOLDER = "__module__"  # the page's module slug: the renderer does not know it, the page's address does


def _script_safe_json(value) -> str:
    """JSON safe inside <script>: no '<', '>' or '&' that could end the element."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def lab_embed_html(lab: dict, dom_id: str) -> str:
    metrics = metrics_for(lab["demo"])
    urls = {name: reverse(f"labs:{name}", args=[MODULE_PLACEHOLDER, lab["id"]])
            for name in ("table", "answers", "submit")}
    config = {
        "lab": lab, "metrics": {n: metrics[n].describe(n) for n in lab_metrics(lab)}, "urls": urls,
        "modulePlaceholder": MODULE_PLACEHOLDER, "wsPath": "/ws/demos/", "plotlyUrl": static("vendor/plotly.min.js"),
    }
    sides = SIDES.get(lab["demo"], {})
    configs = [{**c, "side_note": sides.get(c["side"], ""),
                "shares": [o["label"] for o in lab["configs"] if o["id"] != c["id"] and o["params"] == c["params"]]}
               for c in lab["configs"]]
    return render_to_string("labs/embed.html", {
        "lab": lab, "dom_id": dom_id, "metric": metrics[lab["metric"]], "configs": configs,
        "config_json": _script_safe_json(config), "script_url": static("js/labs/lab.js"),
    })
