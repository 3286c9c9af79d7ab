"""The lessons' drawn diagrams (issue 15): hand-written SVGs under static/img/diagrams/, embedded as Markdown
images. Every diagram a lesson references exists, is served, parses as SVG with a <title> and <desc>, carries no
script, event handler or outside resource, stays readable at phone width, and shows on its lesson page with alt text.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse

from courseapp.content import parse_module_file
from courseapp.loader import load_course, render_module_file
from courseapp.rendering import render_markdown

ROOT = Path(__file__).resolve().parents[2]
CONTENT = ROOT / "content"
DIAGRAM_DIR = ROOT / "static" / "img" / "diagrams"
DIAGRAM_PREFIX = "/static/img/diagrams/"
SVG_NS = "{http://www.w3.org/2000/svg}"
# Which lesson explains which picture: each must keep its diagram.
EXPECTED = {
    "overview": "transformer-block.svg",
    "kv-cache": "kv-cache-layout.svg",
    "paged-attention": "block-table.svg",
    "speculative-decoding": "speculative-round.svg",
    "continuous-batching": "continuous-batching.svg",
    "flash-attention": "flash-attention-tiling.svg",
    "prefix-caching": "prefix-cache-blocks.svg",
    "quantization": "int4-groups.svg",
    "prefill-decode": "prefill-decode.svg",
}
# The section whose text explains each picture: the image sits under that heading.
SECTION = {
    "continuous-batching": "## Iteration-level scheduling",
    "flash-attention": "## Tiling with an online softmax",
    "prefix-caching": "## Hashing blocks",
    "quantization": "## The formats",
    "prefill-decode": "## Two phases in every request",
}
IMG_RE = re.compile(r"<img\b[^>]*>")
ATTR_RE = re.compile(r'(\w+)="([^"]*)"')
PHONE_VIEWBOX_MAX_WIDTH = 400  # a 390 px phone shows the picture at roughly its own size
MIN_FONT_PX = 12


def _images(html: str) -> list[dict[str, str]]:
    return [dict(ATTR_RE.findall(tag)) for tag in IMG_RE.findall(html)]


def _referenced() -> dict[str, list[str]]:
    """slug → diagram file names its rendered lesson shows."""
    found: dict[str, list[str]] = {}
    for path in sorted(CONTENT.glob("*.md")):
        module = parse_module_file(path)
        names = [img["src"][len(DIAGRAM_PREFIX):] for img in _images(render_module_file(module).html)
                 if img.get("src", "").startswith(DIAGRAM_PREFIX)]
        if names:
            found[module.slug] = names
    return found


REFERENCED = _referenced()
ALL_DIAGRAMS = sorted({name for names in REFERENCED.values() for name in names} | set(EXPECTED.values()))
SVG_FILES = sorted(DIAGRAM_DIR.glob("*.svg"))


def test_each_lesson_embeds_its_diagram_and_every_file_is_used():
    for slug, name in EXPECTED.items():
        assert name in REFERENCED.get(slug, []), f"content/{slug}.md no longer shows {DIAGRAM_PREFIX}{name}"
    used = {name for names in REFERENCED.values() for name in names}
    assert {p.name for p in SVG_FILES} == used, "a diagram file is missing or unused by every lesson"


@pytest.mark.parametrize("name", ALL_DIAGRAMS)
def test_referenced_diagram_is_a_static_file_and_is_served(name, client):
    assert finders.find(f"img/diagrams/{name}"), f"static/img/diagrams/{name} is missing"
    response = client.get(f"{DIAGRAM_PREFIX}{name}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("image/svg+xml")


@pytest.mark.parametrize("path", SVG_FILES, ids=lambda p: p.name)
def test_svg_is_accessible_self_contained_and_script_free(path: Path):
    text = path.read_text(encoding="utf-8")
    root = ET.fromstring(text)  # well-formed XML
    assert root.tag == f"{SVG_NS}svg"
    title, desc = root.find(f"{SVG_NS}title"), root.find(f"{SVG_NS}desc")
    assert title is not None and (title.text or "").strip(), f"{path.name}: no <title>"
    assert desc is not None and len((desc.text or "").strip()) > 40, f"{path.name}: no real <desc>"
    assert root.get("role") == "img"
    for element in root.iter():
        local = element.tag.rsplit("}", 1)[-1].lower()
        assert local not in {"script", "foreignobject", "iframe", "image", "use", "a"}, f"{path.name}: <{local}>"
        for attr, value in element.attrib.items():
            attr_local = attr.rsplit("}", 1)[-1].lower()
            assert not attr_local.startswith("on"), f"{path.name}: event handler {attr_local}"
            assert "javascript:" not in value.lower(), f"{path.name}: javascript: URL"
            if attr_local == "href":
                assert value.startswith("#"), f"{path.name}: outside reference {value}"
    lowered = text.lower().replace('xmlns="http://www.w3.org/2000/svg"', "")
    for outside in ("@import", "<script", "http:", "https:", "data:"):
        assert outside not in lowered, f"{path.name}: {outside} (diagrams are self-contained and work offline)"
    assert not re.search(r"url\(\s*['\"]?(?!#)", lowered), f"{path.name}: url() to something outside the file"
    # Readable on a phone: drawn for a narrow width, no text smaller than 12 px at that size.
    _, _, width, _ = (float(v) for v in root.get("viewBox").split())
    assert width <= PHONE_VIEWBOX_MAX_WIDTH
    sizes = [float(s) for s in re.findall(r"font-size:\s*([\d.]+)px", text)]
    assert sizes and min(sizes) >= MIN_FONT_PX, f"{path.name}: text below {MIN_FONT_PX}px"


@pytest.mark.django_db
@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_lesson_page_shows_the_diagram_with_alt_text(slug, client):
    load_course(CONTENT)
    response = client.get(reverse("courseapp:module", args=[slug]))
    assert response.status_code == 200
    images = [img for img in _images(response.content.decode()) if img.get("src", "").startswith(DIAGRAM_PREFIX)]
    assert [img["src"] for img in images] == [f"{DIAGRAM_PREFIX}{EXPECTED[slug]}"]
    assert len(images[0].get("alt", "").strip()) > 40, "the diagram needs alt text that says what it shows"


@pytest.mark.parametrize("slug", sorted(SECTION))
def test_diagram_sits_in_the_section_that_explains_it(slug):
    source = (CONTENT / f"{slug}.md").read_text(encoding="utf-8")
    image = source.index(f"]({DIAGRAM_PREFIX}{EXPECTED[slug]})")
    heading = source.rindex("\n## ", 0, image)
    assert source[heading + 1:].startswith(SECTION[slug] + "\n"), source[heading + 1:heading + 60]


def test_markdown_image_keeps_src_and_alt_but_not_handlers():
    html = render_markdown('![A diagram](/static/img/diagrams/x.svg)\n\n<img src="/a.svg" alt="b" onerror="x()">\n',
                           validate_demos=False).html
    assert '<img src="/static/img/diagrams/x.svg" alt="A diagram">' in html
    assert "onerror" not in html


DIAGRAM_STATE = """() => [...document.querySelectorAll('#lesson img[src^="/static/img/diagrams/"]')].map((img) => {
  const r = img.getBoundingClientRect();
  return {src: img.getAttribute('src'), loaded: img.complete && img.naturalWidth > 0, left: r.left, right: r.right,
          width: r.width, viewport: document.documentElement.clientWidth,
          scrollWidth: document.scrollingElement.scrollWidth};
})"""


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_diagrams_load_under_the_csp_and_fit_a_phone(transactional_db, live_server, csp_page):
    """In Chromium with the site's Content-Security-Policy enforced, at 390 px: every diagram loads, sits
    inside the screen at a readable size, and no policy violation is reported."""
    load_course(CONTENT)
    page = csp_page
    violations: list[str] = []
    page.on("console", lambda msg: "Content Security Policy" in msg.text and violations.append(msg.text))
    page.set_viewport_size({"width": 390, "height": 844})
    for slug, name in EXPECTED.items():
        page.goto(f"{live_server.url}/modules/{slug}/", wait_until="load")
        (state,) = page.evaluate(DIAGRAM_STATE)
        assert state["src"] == f"{DIAGRAM_PREFIX}{name}" and state["loaded"], (slug, state)
        assert -1 <= state["left"] and state["right"] <= state["viewport"] + 1, (slug, state)
        assert state["width"] >= 300, (slug, state)  # drawn 360 wide: about full size on a phone
        assert state["scrollWidth"] <= 390, (slug, state)
    assert violations == [] and page.errors == [], (violations, page.errors)
