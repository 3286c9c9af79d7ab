"""Glossary terms, read from the glossary module's Markdown, for linking a lesson's terms to their definitions.

An entry is a list item of the glossary module that starts with a bold term and a colon:
``- **Grouped-query attention (GQA)**: definition …``. Each entry has an anchor (``term-<slug>``) on the
glossary page and is matched in lessons by every name it gives: the term, the abbreviation in brackets,
and each of a comma-separated list ("FP8, BF16, FP16, FP32").
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from django.core.cache import cache
from django.utils.text import slugify

from .models import Module

GLOSSARY_SLUG = "glossary"
ENTRY = re.compile(r"^- \*\*(?P<term>[^*]+)\*\*:\s*(?P<definition>.+)$", re.MULTILINE)
LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
SEE_ALSO = re.compile(r"\s*See [^.]*\.?\s*$")
MIN_NAME = 2  # "KV", "GQA": shorter names would match inside ordinary words' neighbourhoods


@dataclass(frozen=True)
class Term:
    anchor: str
    term: str
    names: tuple[str, ...]
    definition: str


def anchor(term: str) -> str:
    return "term-" + slugify(term)


def names_of(term: str) -> tuple[str, ...]:
    """The ways a lesson may write a term: "Grouped-query attention (GQA)" → both halves."""
    bracket = re.match(r"^(?P<main>.+?)\s*\((?P<inner>[^)]+)\)$", term)
    parts = [bracket["main"], bracket["inner"]] if bracket else [term]
    names = [name.strip() for part in parts for name in part.split(",")]
    return tuple(dict.fromkeys(n for n in names if len(n) >= MIN_NAME))


def parse_terms(source: str) -> list[Term]:
    """Every entry of a glossary's Markdown, with its definition as plain text (links reduced to their text)."""
    terms = []
    for match in ENTRY.finditer(source):
        term = match["term"].strip()
        definition = SEE_ALSO.sub("", LINK.sub(r"\1", match["definition"])).replace("**", "").replace("`", "")
        terms.append(Term(anchor(term), term, names_of(term), definition.strip()))
    return terms


def glossary_terms() -> list[dict]:
    """The published glossary's terms as dicts (for `json_script`); [] when there is none.

    Cached per glossary version: the key holds its `updated_at`, so an edit is seen at once.
    """
    glossary = Module.objects.published().filter(slug=GLOSSARY_SLUG)
    row = glossary.values("pk", "updated_at").first()  # its source (tens of kB) is read only when not cached
    if row is None:
        return []
    key = f"glossary-terms:{row['pk']}:{row['updated_at'].isoformat()}"
    terms = cache.get(key)
    if terms is None:
        source = glossary.filter(pk=row["pk"]).values_list("source", flat=True).first() or ""
        terms = [asdict(t) for t in parse_terms(source)]
        cache.set(key, terms, 3600)
    return terms
