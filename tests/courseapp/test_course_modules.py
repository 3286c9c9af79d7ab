"""Every module in content/: loads with the real loader, has a live demo or calculator, a 5-question quiz with
an explanation for every choice, narration cues, no broken internal links, and a Sources list when it states
figures. Reference pages (track `reference`, e.g. the glossary) are lessons-without-exercises: they must load,
narrate and link correctly but need no demo or quiz.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from courseapp.content import parse_module_file, parse_tracks_file
from courseapp.loader import load_course, render_module_file
from demos.registry import DEMOS

ROOT = Path(__file__).resolve().parents[2]
CONTENT = ROOT / "content"
CALCULATORS = ROOT / "static" / "js" / "calculators"
MODULE_FILES = sorted(CONTENT.glob("*.md"))
EXERCISE_FREE_TRACKS = {"reference"}
QUIZ_QUESTIONS = 5

# A figure: a number with a unit or a multiplier, e.g. "128 KiB", "3.35 TB/s", "2×", "60%", "10⁸".
FIGURE_RE = re.compile(r"\d[\d,.]*\s*(?:[KMGT]i?B\b|[KMGT]B/s|GB/s|TB/s|TFLOP|FLOP/s|×|x\b|%|tokens per second)|10[⁰¹²³⁴⁵⁶⁷⁸⁹]+")
LINK_RE = re.compile(r'href="([^"]+)"')


def _slugs() -> set[str]:
    return {parse_module_file(p).slug for p in MODULE_FILES}


def _prose(body: str) -> str:
    """The body without fenced code, directive blocks and the Sources section (figures there are citations)."""
    body = re.sub(r"^```.*?^```", "", body, flags=re.S | re.M)
    body = re.sub(r"^:::\{(?:quiz|demo|calculator)\}.*?^:::", "", body, flags=re.S | re.M)
    return body.split("\n## Sources", 1)[0]


def test_there_are_modules_and_the_course_track_is_complete():
    slugs = _slugs()
    for slug in ("overview", "prefill-decode", "kv-cache", "flash-attention", "serving", "gpu-bandwidth", "glossary"):
        assert slug in slugs, f"content/{slug}.md is missing"


@pytest.mark.django_db
def test_whole_content_directory_loads_with_the_real_loader():
    report = load_course(CONTENT)
    assert sorted(report.created + report.updated + report.unchanged) == sorted(_slugs())


def test_orders_are_unique_within_a_track():
    seen: dict[tuple[str, int], str] = {}
    for path in MODULE_FILES:
        m = parse_module_file(path)
        key = (m.track, m.order)
        assert key not in seen, f"{path.name} and {seen[key]} share order {m.order} in track {m.track}"
        seen[key] = path.name
    tracks = {t.slug for t in parse_tracks_file(CONTENT / "tracks.yaml")}
    assert {t for t, _ in seen} <= tracks


@pytest.mark.parametrize("path", MODULE_FILES, ids=lambda p: p.stem)
def test_module_is_complete(path: Path):
    module = parse_module_file(path)
    rendered = render_module_file(module)  # validates demo props against the registry, parses the quiz
    where = path.name

    assert rendered.cues, f"{where}: no narration cues"
    assert all(c.text.strip() for c in rendered.cues), f"{where}: an empty narration cue"
    assert rendered.word_count > 150, f"{where}: too little lesson text ({rendered.word_count} words)"

    if module.track not in EXERCISE_FREE_TRACKS:
        assert rendered.demos or rendered.calculators, f"{where}: needs a live demo or a calculator"
        assert len(rendered.questions) == QUIZ_QUESTIONS, f"{where}: quiz has {len(rendered.questions)} questions"
        for q in rendered.questions:
            assert len(q.choices) >= 2 and any(c.correct for c in q.choices), f"{where}: {q.text!r}"
            assert not all(c.correct for c in q.choices), f"{where}: every choice is correct in {q.text!r}"
            for c in q.choices:
                assert c.explanation.strip(), f"{where}: choice {c.text!r} has no explanation"
    for name in rendered.calculators:
        assert (CALCULATORS / f"{name}.js").is_file(), f"{where}: calculator {name!r} has no static/js/calculators/{name}.js"


@pytest.mark.parametrize("path", MODULE_FILES, ids=lambda p: p.stem)
def test_internal_links_resolve(path: Path):
    module = parse_module_file(path)
    html = render_module_file(module).html
    slugs = _slugs()
    for href in LINK_RE.findall(html):
        if href.startswith(("http://", "https://", "mailto:", "#")):
            continue
        if href.startswith("/modules/"):
            slug = href.split("/")[2]
            assert slug in slugs, f"{path.name}: link {href} points to no module"
        elif href.split("#")[0].endswith(".md"):
            target = (path.parent / href.split("#")[0]).resolve()
            assert target.is_file(), f"{path.name}: link {href} points to a missing file"
        elif href.startswith("/demos/"):  # the demo index, or one demo's own page (linked under each embed)
            name = href.split("/")[2]
            assert name == "" or name in DEMOS, f"{path.name}: link {href} points to no demo"
        elif href.startswith("/static/"):  # an embed's own stylesheet
            static_file = Path(__file__).resolve().parents[2] / "static" / href.removeprefix("/static/")
            assert static_file.is_file(), f"{path.name}: link {href} points to no static file"
        elif href.startswith("/exercises/"):  # an embedded exercise's own page, or the endpoint its form posts to
            from exercises import catalog

            name = href.split("/")[2]
            assert name in catalog.EXERCISES, f"{path.name}: link {href} points to no exercise"
        else:
            pytest.fail(f"{path.name}: internal link {href} is neither /modules/<slug>/, /demos/… nor a .md file")


@pytest.mark.parametrize("path", MODULE_FILES, ids=lambda p: p.stem)
def test_pages_that_state_figures_cite_sources(path: Path):
    module = parse_module_file(path)
    figures = FIGURE_RE.findall(_prose(module.body))
    if not figures:
        return
    match = re.search(r"^## Sources\s*\n(.*)", module.body, flags=re.S | re.M)
    assert match, f"{path.name} states figures ({', '.join(figures[:3])}…) but has no '## Sources' section"
    items = re.findall(r"^\s*(?:\d+\.|[-*])\s+\S", match.group(1), flags=re.M)
    assert items, f"{path.name}: the Sources section lists nothing"


def test_figure_detector_sees_figures():
    assert FIGURE_RE.search("bf16 KV is 128 KiB per token")
    assert FIGURE_RE.search("an H100 reads 3.35 TB/s")
    assert FIGURE_RE.search("about 2× faster")
    assert not FIGURE_RE.search("one token per forward pass")


def test_glossary_is_in_alphabetical_order_and_each_entry_under_its_letter_range():
    """The glossary says "Terms are in alphabetical order": each section's terms, and the sections themselves."""
    text = (CONTENT / "glossary.md").read_text(encoding="utf-8")
    terms = []
    for match in re.finditer(r"^## ([A-Z])–([A-Z])\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M):
        first, last, body = match.groups()
        section = re.findall(r"^- \*\*(.+?)\*\*", body, flags=re.M)
        assert section, f"empty section {first}–{last}"
        for term in section:
            assert first <= term[0].upper() <= last, f"{term!r} is not in {first}–{last}"
        terms += section
    assert len(terms) > 30
    assert terms == sorted(terms, key=str.casefold)
