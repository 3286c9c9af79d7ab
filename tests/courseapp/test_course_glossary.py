"""Glossary terms: parsed from the glossary module, linked from lessons with their definition on hover/focus."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.urls import reverse

from courseapp.glossary import glossary_terms, parse_terms
from courseapp.models import Module, Track

REPO_CONTENT = Path(__file__).resolve().parents[2] / "content"

GLOSSARY = ("## Terms\n\n"
            "- **Inference**: running a trained model to produce outputs. See [the overview](/modules/intro/).\n"
            "- **Grouped-query attention (GQA)**: several query heads share one **key-value** head.\n"
            "- **FP8, BF16**: floating-point formats.\n")


def make_glossary(draft: bool = False) -> Module:
    return Module.objects.create(slug="glossary", title="Glossary", track=Track.objects.get(slug="basics"),
                                 order=9, draft=draft, source=GLOSSARY, html="<p>terms</p>")


def test_the_course_glossary_parses_into_unique_anchored_terms():
    terms = parse_terms((REPO_CONTENT / "glossary.md").read_text())
    assert len(terms) >= 30 and len({t.anchor for t in terms}) == len(terms)
    gqa = next(t for t in terms if t.term.startswith("Grouped-query"))
    assert gqa.names == ("Grouped-query attention", "GQA") and gqa.anchor == "term-grouped-query-attention-gqa"
    assert all("](" not in t.definition and "**" not in t.definition and not t.definition.endswith("See")
               for t in terms)


def test_names_definitions_and_see_also_are_cleaned():
    inference, gqa, formats = parse_terms(GLOSSARY)
    assert inference.definition == "running a trained model to produce outputs."  # "See …" is the page's, not the tip's
    assert gqa.definition == "several query heads share one key-value head."
    assert formats.names == ("FP8", "BF16")


@pytest.mark.django_db
def test_lesson_pages_carry_the_published_glossary_terms(client, course):
    assert glossary_terms() == []
    html = client.get(reverse("courseapp:module", args=["intro"])).content.decode()
    assert "glossary-terms" not in html  # no glossary, no script
    make_glossary()
    html = client.get(reverse("courseapp:module", args=["intro"])).content.decode()
    data = json.loads(re.search(r'<script id="glossary-terms" type="application/json">(.*?)</script>', html).group(1))
    assert [t["anchor"] for t in data] == ["term-inference", "term-grouped-query-attention-gqa", "term-fp8-bf16"]
    assert "js/glossary.js" in html


@pytest.mark.django_db
def test_a_draft_glossary_is_not_shown_to_students(client, course):
    make_glossary(draft=True)
    assert glossary_terms() == []


@pytest.mark.django_db
def test_the_glossary_page_shows_its_terms_in_alphabetical_order(client):
    """The page says "Terms are in alphabetical order": what a student reads, every entry, in that order."""
    from courseapp.loader import load_course

    load_course(REPO_CONTENT)
    html = client.get(reverse("courseapp:module", args=["glossary"])).content.decode()
    assert "Terms are in alphabetical order" in html
    shown = re.findall(r'<li[^>]*>\s*(?:<p>)?\s*<strong>([^<]+)</strong>:', html)
    assert len(shown) == len(parse_terms((REPO_CONTENT / "glossary.md").read_text())) > 30
    assert shown == sorted(shown, key=str.casefold)


@pytest.mark.parametrize("term, says", [
    ("Token", ["vocabulary", "49,152"]),
    ("Attention", ["query", "keys", "softmax", "weighted average", "values"]),
    ("Query, key and value (Q, K, V)", ["looking for", "KV cache"]),
    ("Softmax", ["add up to 1", "e to the power"]),
    ("Embedding", ["576"]),
    ("Logits", ["vocabulary", "softmax"]),
    ("Perplexity", ["exponential", "negative log-likelihood", "lower is better"]),
])
@pytest.mark.django_db
def test_the_glossary_defines_the_basic_terms_for_lesson_tooltips(client, term, says):
    """The terms a newcomer meets first are defined (as the primer and the lessons teach them) and reach the
    lesson pages' tooltips."""
    from courseapp.loader import load_course

    load_course(REPO_CONTENT)
    entry = next(t for t in glossary_terms() if t["term"] == term)
    assert all(phrase in entry["definition"] for phrase in says), entry["definition"]
    html = client.get(reverse("courseapp:module", args=["primer"])).content.decode()
    data = json.loads(re.search(r'<script id="glossary-terms" type="application/json">(.*?)</script>', html).group(1))
    assert entry["anchor"] in {t["anchor"] for t in data}
    page = client.get(reverse("courseapp:module", args=["glossary"])).content.decode()
    assert f"<strong>{term}</strong>:" in page
