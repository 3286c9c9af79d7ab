"""The "Choosing the next token" module (content/sampling.md) as a student gets it: the page serves its formulas as
MathML, the live demo with the reference run its narration replays, the sampler exercise, a quiz whose every wrong
answer explains itself, and glossary entries for the terms it teaches; its narration speaks the formulas as words."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.urls import reverse

from courseapp.content import parse_module_file
from courseapp.glossary import parse_terms
from courseapp.loader import load_course, render_module_file
from demos.registry import validate

CONTENT = Path(__file__).resolve().parents[2] / "content"
MODULE = CONTENT / "sampling.md"
TERMS = ("Greedy decoding", "Temperature", "Top-k sampling", "Top-p sampling (nucleus sampling)", "Min-p sampling",
         "Repetition penalty", "Logits")


def test_the_module_renders_formulas_demo_exercise_and_quiz():
    module = parse_module_file(MODULE)
    assert (module.slug, module.track, module.order) == ("sampling", "llm-inference", 11)
    rendered = render_module_file(module)
    assert rendered.html.count("<math") >= 4 and "\\frac" not in rendered.html  # MathML, no LaTeX source left
    assert [d["name"] for d in rendered.demos] == ["sampling"]
    assert f'data-reference-run="{reverse("courseapp:reference_run", args=["sampling"])}"' in rendered.html
    assert 'data-exercise="sampler"' in rendered.html
    assert len(rendered.questions) == 5
    for q in rendered.questions:
        wrong = [c for c in q.choices if not c.correct]
        assert wrong and all(len(c.explanation.split()) >= 8 for c in wrong), q.text  # says why, not just "no"
    assert 12 <= rendered.reading_minutes <= 15


def test_the_narration_speaks_the_formulas_and_moves_the_demo_through_its_reference_run():
    rendered = render_module_file(parse_module_file(MODULE))
    spoken = " ".join(c.text for c in rendered.cues)
    assert "e to the power" in spoken and "\\frac" not in spoken and "$$" not in spoken
    markers = [int(n) for n in re.findall(r'data-demo="sampling" data-step="(\d+)"', rendered.html)]
    run = json.loads((CONTENT / "runs" / "sampling.json").read_text())
    steps = [e for e in run["events"] if e["type"] == "sampling_step"]
    assert markers and max(markers) < run["steps"] == len(steps)
    assert validate("sampling", run["params"]) == run["params"]
    # What the narration says about its steps is what the stored run shows.
    assert steps[0]["n_kept"] == 3 and steps[0]["rank"] == 0
    assert steps[4]["rank"] == 2 and steps[4]["top_texts"][2] == " woman"
    assert steps[5]["n_kept"] == 1 and steps[5]["probs_t"][0] > 0.9


def test_every_term_the_module_teaches_is_in_the_glossary_and_points_back_to_it():
    glossary = (CONTENT / "glossary.md").read_text(encoding="utf-8")
    terms = {t.term: t for t in parse_terms(glossary)}
    lesson = MODULE.read_text(encoding="utf-8").lower()
    for term in TERMS:
        assert term in terms, term
        assert any(name.lower() in lesson for name in terms[term].names), term
        entry = next(line for line in glossary.splitlines() if line.startswith(f"- **{term}**"))
        assert "(/modules/sampling/)" in entry, term


@pytest.mark.django_db
def test_the_lesson_page_serves_the_demo_and_the_exercise_and_the_primer_keeps_its_exercise(client):
    load_course(CONTENT)
    page = client.get("/modules/sampling/").content.decode()
    assert 'data-demo="sampling"' in page and 'data-exercise="sampler"' in page and "<math" in page
    assert 'data-exercise="sampler"' in client.get("/modules/primer/").content.decode()
    run = client.get(reverse("courseapp:reference_run", args=["sampling"])).json()
    assert run["demo"] == "sampling" and any(e["type"] == "sampling_step" for e in run["events"])
