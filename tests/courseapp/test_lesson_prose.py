"""Lessons teach in 12–15 minutes and quote this server only through its live profile: no module reads for more than
15 minutes, and no lesson's prose names a CPU model or carries a dated measurement (those live in
docs/lesson-records.md, which the lessons link)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from courseapp.content import parse_module_file
from courseapp.rendering import render_markdown

CONTENT = Path(__file__).resolve().parents[2] / "content"
RECORD = CONTENT.parent / "docs" / "lesson-records.md"
MODULES = sorted(p for p in CONTENT.glob("*.md"))
MAX_READING_MINUTES = 15

CPU_MODEL = re.compile(r"\b(EPYC|Xeon|Ryzen|Threadripper|Core i[3579]|Graviton|Neoverse|Apple M[1-9]|"
                       r"Sapphire Rapids|Emerald Rapids|Granite Rapids|Ice Lake|Cascade Lake|Skylake|Zen ?[1-5])\b")
MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
DATED = re.compile(rf"\b20\d\d-[01]\d-[0-3]\d\b|\brecorded on\b|\b\d{{1,2}} ({MONTHS}) 20\d\d\b|\b({MONTHS}) 20\d\d\b",
                   re.IGNORECASE)


def prose(path: Path) -> str:
    """The lesson's words as a student reads them: body, quiz and captions; its numbered sources list aside
    (a paper's year is a citation, not a measurement)."""
    body = parse_module_file(path).body
    return "\n".join(line for line in body.splitlines() if not re.match(r"\d+\. ", line))


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_no_module_reads_for_more_than_fifteen_minutes(path):
    minutes = render_markdown(parse_module_file(path).body, validate_demos=False).reading_minutes
    assert minutes <= MAX_READING_MINUTES, f"{path.name} reads for {minutes} minutes: move the record to docs/"


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_no_lesson_names_a_cpu_or_dates_a_figure(path):
    text = prose(path)
    assert not CPU_MODEL.findall(text), f"{path.name} names a CPU model: say 'the course server' and link the record"
    assert not [m.group(0) for m in DATED.finditer(text)], f"{path.name} dates a figure: move it to {RECORD.name}"


def test_the_checks_catch_what_they_are_for():
    assert CPU_MODEL.search("on a 2-core AMD EPYC with AVX-512") and CPU_MODEL.search("Intel Xeon Platinum")
    assert DATED.search("(recorded on 2026-11-25)") and DATED.search("measured in November 2026")
    assert not CPU_MODEL.search("the course server's CPU, with AVX-512 VNNI") and not DATED.search("arXiv:2208.07339")


def test_every_lesson_that_points_to_the_record_finds_its_section():
    record = RECORD.read_text()
    for path in MODULES:
        if "docs/lesson-records.md" in path.read_text():
            assert f"(`content/{path.name}`)" in record, f"docs/lesson-records.md has no section for {path.name}"
