"""The primer's attention demo in a real browser against the real stack (Daphne + Celery worker + Redis): the form
starts from the catalog's spec, a run draws the real model's weights as a heatmap with the causal mask visible, and
the same numbers are in a table; the primer is the first module of the course."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings

from courseapp.loader import load_course
from courseapp.models import Module
from demos.catalog.attention import SPEC

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(420)]

REPO_CONTENT = Path(__file__).resolve().parents[2] / "content"
SCREENSHOTS = Path(os.environ.get("DEMO_SCREENSHOT_DIR", settings.BASE_DIR / "var" / "screenshots"))
STATE = "document.querySelector('.ilab-demo').dataset.state"

HEATMAP = """() => {
  const gd = document.querySelector('.ilab-demo .js-plotly-plot');
  const t = gd.data[0];
  return {type: t.type, x: t.x, y: t.y, z: t.z, bg: gd.layout.plot_bgcolor, yrange: gd._fullLayout.yaxis.range,
          xtitle: gd.layout.xaxis.title.text, ytitle: gd.layout.yaxis.title.text,
          role: gd.getAttribute('role'), label: gd.getAttribute('aria-label')};
}"""


@pytest.mark.django_db(transaction=True)
def test_the_primer_comes_first_and_draws_the_real_attention_weights(live_stack, browser_page):
    load_course(REPO_CONTENT)
    assert Module.objects.filter(draft=False).in_course_order().first().slug == "primer"
    page = browser_page
    page.goto(f"{live_stack.url}/modules/primer/")
    demo = page.locator(".ilab-demo")
    demo.get_by_role("button", name="Run", exact=True).wait_for()
    # The form starts from the catalog's spec (the page embeds it; the script repeats nothing).
    assert demo.get_by_role("textbox").input_value() == SPEC.params["prompt"].default
    layer, head = demo.get_by_role("spinbutton").all()[:2]
    assert layer.input_value() == str(SPEC.params["layer"].default) and layer.get_attribute("max") == "29"
    assert head.input_value() == str(SPEC.params["head"].default) and head.get_attribute("max") == "8"

    demo.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function(f"() => ['done','error','cancelled'].includes({STATE})", timeout=150_000)
    assert page.evaluate(STATE) == "done", demo.locator(".ilab-calc__status").inner_text() + live_stack.log(
        live_stack.worker)[-3000:]

    heat = page.evaluate(HEATMAP)
    n = len(heat["x"])
    assert heat["type"] == "heatmap" and n == 11 and heat["x"] == heat["y"]  # keys across, queries down
    assert heat["x"][1] == "1: ␣cat" and heat["yrange"][0] > heat["yrange"][1]  # the first token at the top
    assert heat["xtitle"].startswith("key token") and heat["ytitle"] == "query token"
    for i, row in enumerate(heat["z"]):
        assert all(w is None for w in row[i + 1:]), "the causal mask is drawn as masked cells"
        assert abs(sum(row[: i + 1]) - 1) < 1e-4
    assert heat["bg"] == "#d1d5db"  # masked cells show the grey background
    assert heat["role"] == "img" and "attention weights" in heat["label"].lower()  # the chart names itself
    summary = demo.locator("figcaption").first.inner_text()
    assert "Each row sums to 1" in summary and "10 attend most to the token just before them" in summary
    rows = demo.get_by_role("table", name="What each token attends to most").locator("tbody tr")
    assert rows.count() == n and rows.nth(2).locator("td").first.inner_text().startswith("1: ␣cat")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    demo.screenshot(path=str(SCREENSHOTS / "attention-demo.png"))
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: the heatmap fits, nothing scrolls sideways
    page.wait_for_timeout(500)
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    box = page.locator(".ilab-demo .js-plotly-plot .main-svg").first.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 391, box
    demo.screenshot(path=str(SCREENSHOTS / "attention-demo-phone.png"))
    assert not page.errors, page.errors
