"""The course map in Chromium under the site's CSP (issue 15): its links take the student to the module, by
mouse and by keyboard, and at phone width (390×844) the map stacks without any sideways scroll."""
from __future__ import annotations

import pytest


pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

MAP_LINKS = """() => [...document.querySelectorAll('.course-map a.map-link')].map((a) => {
  const r = a.getBoundingClientRect();
  return {slug: a.dataset.module, text: a.textContent.trim(), left: r.left, right: r.right, width: r.width};
})"""
PAGE_WIDTH = """() => ({scrollWidth: document.documentElement.scrollWidth,
  clientWidth: document.documentElement.clientWidth,
  mapRight: document.querySelector('.course-map').getBoundingClientRect().right,
  stageLefts: [...document.querySelectorAll('.map-stage')].map((li) => Math.round(li.getBoundingClientRect().left))})"""


def test_clicking_a_map_link_opens_that_module(real_course, csp_page, csp_violations):
    page = csp_page
    violations = csp_violations
    page.goto(f"{real_course}/", wait_until="load")
    links = page.evaluate(MAP_LINKS)
    assert len(links) >= 12 and len({link["slug"] for link in links}) == len(links)
    assert all(link["text"] and link["width"] > 0 for link in links)
    # The map's stylesheet applied (a grid of stages), not the browser's default list.
    assert page.evaluate("getComputedStyle(document.querySelector('.map-stages')).display") == "grid"

    page.click(".course-map a[data-module='kv-cache']")
    page.wait_for_url(f"{real_course}/modules/kv-cache/")
    assert page.inner_text("h1") == "The KV cache"

    # By keyboard: focus a map link, press Enter.
    page.goto(f"{real_course}/", wait_until="load")
    page.focus(".course-map a[data-module='flash-attention']")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{real_course}/modules/flash-attention/")
    assert "FlashAttention" in page.inner_text("h1")
    assert violations == [] and page.errors == [], (violations, page.errors)


def test_map_fits_a_phone_without_sideways_scroll(real_course, csp_page):
    page = csp_page
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{real_course}/", wait_until="load")
    state = page.evaluate(PAGE_WIDTH)
    assert state["scrollWidth"] <= 390, state
    assert state["mapRight"] <= state["clientWidth"], state
    assert len(set(state["stageLefts"])) == 1, state  # one column: the stages stack vertically
    for link in page.evaluate(MAP_LINKS):
        assert link["left"] >= 0 and link["right"] <= state["clientWidth"], link
    # At desktop width the path runs across the page instead.
    page.set_viewport_size({"width": 1280, "height": 900})
    state = page.evaluate(PAGE_WIDTH)
    assert state["scrollWidth"] <= 1280 and len(set(state["stageLefts"])) == 6, state
