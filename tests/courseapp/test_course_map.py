"""The course map on the index (issue 15): one request's life, each visible module linked once on the part it
explains, with the learner's progress; drafts only for instructors; modules the map does not know land on
"other" instead of breaking it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse

from courseapp import course_map
from courseapp.content import parse_module_file
from courseapp.loader import load_course
from courseapp.models import Module
from courseapp.progress import Learner, mark_complete

pytestmark = pytest.mark.django_db

REPO_CONTENT = Path(__file__).resolve().parents[2] / "content"
MAP_RE = re.compile(r'<section class="course-map".*?</section>', re.S)
STAGE_RE = re.compile(r'<li class="map-stage map-stage-([\w-]+)[^"]*".*?(?=<li class="map-stage |</ol>)', re.S)
LINK_RE = re.compile(r'<a class="map-link" href="([^"]+)" data-module="([^"]+)">(.*?)</a>', re.S)


def course_map_html(client) -> str:
    response = client.get(reverse("courseapp:index"))
    assert response.status_code == 200
    found = MAP_RE.findall(response.content.decode())
    assert len(found) == 1, "the index shows one course map"
    return found[0]


def map_links(html: str) -> list[tuple[str, str, str]]:
    """(href, slug, link text) for every module link on the map."""
    return LINK_RE.findall(html)


def stage_of_each_module(html: str) -> dict[str, str]:
    placed = {}
    for match in STAGE_RE.finditer(html):
        for _, slug, _ in map_links(match.group(0)):
            placed[slug] = match.group(1)
    return placed


def real_modules():
    return [parse_module_file(p) for p in sorted(REPO_CONTENT.glob("*.md"))]


def test_map_is_on_the_index_with_a_heading_and_a_description(client):
    load_course(REPO_CONTENT)
    html = course_map_html(client)
    assert 'aria-labelledby="course-map-heading"' in html and 'id="course-map-heading"' in html
    assert 'aria-describedby="course-map-desc"' in html and 'id="course-map-desc"' in html
    # The request's life, in order: prompt → prefill → KV cache → decode steps → batch → GPU, then the lever.
    keys = [m.group(1) for m in STAGE_RE.finditer(html)]
    assert keys[:7] == ["prompt", "prefill", "kv-cache", "decode", "batch", "gpu", "cheaper"]
    for n in range(1, 7):
        assert f'<span class="visually-hidden">Step {n}: </span>' in html
    # The drawings are decorative; the words carry the meaning.
    assert all('aria-hidden="true"' in svg for svg in re.findall(r"<svg\b[^>]*>", html))
    assert "<script" not in html and " style=" not in html


def test_every_published_module_is_linked_exactly_once_on_its_stage(client):
    load_course(REPO_CONTENT)
    published = {m.slug: m for m in real_modules() if not m.draft}
    html = course_map_html(client)
    links = map_links(html)
    slugs = [slug for _, slug, _ in links]
    assert sorted(slugs) == sorted(published), "each published module appears once on the map"
    for href, slug, text in links:
        assert href == reverse("courseapp:module", args=[slug])
        assert Module.objects.get(slug=slug).label in text  # a link with words, not an icon
    placed = stage_of_each_module(html)
    assert placed["overview"] == "prompt" and placed["primer"] == "prompt"  # tokens and attention: the prompt's part
    assert placed["prefill-decode"] == "prefill"
    assert placed["kv-cache"] == "kv-cache"
    assert {placed[s] for s in ("continuous-batching", "paged-attention", "prefix-caching")} == {"batch"}
    assert placed["gpu-bandwidth"] == "gpu"
    assert {placed[s] for s in ("quantization", "speculative-decoding", "flash-attention")} == {"cheaper"}
    assert placed["glossary"] == "other"  # not on a request's path: it goes to "Also in the course"
    # Decode's own module is how each step chooses its token (the phase itself is taught with prefill, linked there).
    assert placed["sampling"] == "decode"
    assert placed["structured-output"] == "decode"  # the grammar's mask acts on that same choice


def test_completed_module_is_marked_by_symbol_and_words(client, student):
    load_course(REPO_CONTENT)
    for slug in ("kv-cache", "prefix-caching"):
        mark_complete(Learner(user=student, visitor=""), Module.objects.get(slug=slug))
    client.force_login(student)
    links = {slug: text for _, slug, text in map_links(course_map_html(client))}
    assert "✓" in links["kv-cache"] and "(completed)" in links["kv-cache"]
    assert "✓" not in links["quantization"] and "(not completed yet)" in links["quantization"]
    html = course_map_html(client)
    assert html.count('<li class="map-module is-complete">') == 2
    batch = next(m.group(0) for m in STAGE_RE.finditer(html) if m.group(1) == "batch")
    in_batch = sum(stage == "batch" for stage in course_map.MODULE_STAGE.values())
    assert f"1 of {in_batch} completed" in batch  # a stage with several modules counts them


def test_anonymous_visitors_progress_shows_on_the_map(client, course):
    client.post(reverse("courseapp:complete", args=["cache"]))
    links = {slug: text for _, slug, text in map_links(course_map_html(client))}
    assert "(completed)" in links["cache"] and "(not completed yet)" in links["intro"]


def test_draft_only_for_instructors_and_unknown_modules_go_to_other(client, course, student, instructor):
    # The fixture course's slugs are not in the map's table: they land on "other", nothing breaks.
    client.force_login(student)
    html = course_map_html(client)
    assert sorted(slug for _, slug, _ in map_links(html)) == ["cache", "intro"]
    assert set(stage_of_each_module(html).values()) == {"other"}
    assert "/modules/batching/" not in html and "Batching" not in html  # the draft: neither link nor title
    client.force_login(instructor)
    html = course_map_html(client)
    assert sorted(slug for _, slug, _ in map_links(html)) == ["batching", "cache", "intro"]
    draft = next(m.group(0) for m in STAGE_RE.finditer(html) if 'data-module="batching"' in m.group(0))
    assert '<span class="badge">Draft</span>' in draft


def test_stage_table_is_consistent():
    keys = [s.key for s in course_map.STAGES]
    assert len(keys) == len(set(keys)) and course_map.OTHER in keys
    assert set(course_map.MODULE_STAGE.values()) <= set(keys)
    assert course_map.stage_for("a-module-added-tomorrow") == course_map.OTHER
    real = {m.slug for m in real_modules() if not m.draft}
    assert set(course_map.MODULE_STAGE) <= real, "the map places a module that no longer exists"
    assert set(course_map.SEE_ALSO.values()) <= set(course_map.MODULE_STAGE)
