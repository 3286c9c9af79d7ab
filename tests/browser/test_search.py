"""Site search in Chromium: the header's search box finds a lesson section and a glossary entry, under the
site's CSP; a result opens the lesson at the matched section. Served by Django's live server (no engine)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from courseapp.loader import load_course

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

CONTENT = Path(__file__).resolve().parents[2] / "content"


@pytest.fixture
def course_url(transactional_db, live_server):
    load_course(CONTENT)
    return live_server.url


def test_search_from_the_nav_and_open_a_result(course_url, csp_page):
    page = csp_page
    page.goto(f"{course_url}/")
    box = page.get_by_role("search", name="Site").get_by_label("Search lessons and glossary")
    box.fill("block table")
    box.press("Enter")
    page.wait_for_url(re.compile(r"/search/\?q=block\+table$"))
    assert page.get_by_role("heading", name="Search the course", level=1).is_visible()
    results = page.locator(".search-result")
    assert results.count() >= 2
    assert page.locator(".search-result mark").first.inner_text().lower() in ("block", "blocks", "table")
    assert page.locator('.search-result a[href="/modules/glossary/#term-block-table"]').count() == 1

    lesson = page.locator('.search-result a[href^="/modules/paged-attention/#"]').first
    target = lesson.get_attribute("href")
    lesson.click()
    page.wait_for_url(f"**{target}")
    section = page.locator(target[target.index("#"):])
    assert section.is_visible()
    assert page.get_by_role("heading", name="Paged attention", level=1).is_visible()
    assert page.errors == []


def test_the_search_page_works_without_javascript(course_url, chromium):
    context = chromium.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"{course_url}/search/")
        page.get_by_label("Words to find in the lessons and the glossary").fill('GQA "(')
        page.get_by_role("search", name="Search lessons and glossary").get_by_role("button", name="Search").click()
        page.wait_for_url(re.compile(r"/search/\?q="))
        first = page.locator(".search-result a").first
        assert first.get_attribute("href") == "/modules/glossary/#term-grouped-query-attention-gqa"
        first.click()
        page.wait_for_url("**/modules/glossary/#term-grouped-query-attention-gqa")
    finally:
        context.close()


@pytest.mark.parametrize("path", ["/search/?q=kv+cache", "/search/?q=zzzz-nothing", "/modules/glossary/",
                                  "/no/such/page/", "/accounts/login/"])
def test_search_results_glossary_and_error_pages_fit_a_phone(course_url, chromium, path):
    """At 390 × 844: no sideways scroll, and the header's search box stays usable (inside the screen)."""
    context = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.goto(f"{course_url}{path}")
    found = page.evaluate("""() => {
      const box = document.querySelector('header input[type=search]')?.getBoundingClientRect();
      const wide = [...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > 391)
        .map((e) => e.tagName + '.' + e.className).slice(0, 5);
      return {scroll: document.scrollingElement.scrollWidth, box: box && [box.left, box.right, box.width], wide};
    }""")
    context.close()
    assert found["scroll"] <= 390 and found["wide"] == [], found
    assert found["box"] and found["box"][0] >= 0 and found["box"][1] <= 390 and found["box"][2] >= 80, found
