"""Site search (search/index.py): the database's full-text search over lessons and the glossary.

SQLite (FTS5) here; the same queries on PostgreSQL (weighted tsvector) at the end, when its binaries exist.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse

from search import index as search
from courseapp.loader import save_module
from courseapp.models import Module, Track
from courseapp.rendering import render_markdown

from authoring_helpers import save_live

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_postgres import postgres_url  # noqa: E402,F401  (the throw-away PostgreSQL cluster fixture)

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
URL = reverse("search:search")
GLOSSARY = ("## Terms\n\n"
            "- **Grouped-query attention (GQA)**: several query heads share one key-value head.\n"
            "- **Roofline**: a chart of attainable performance against arithmetic intensity.\n")


def results(client, q: str) -> list[str]:
    """The result links of a search, in order."""
    response = client.get(URL, {"q": q})
    assert response.status_code == 200
    return re.findall(r'<h2 class="search-result-title"><a href="([^"]+)"', response.content.decode())


def add_module(slug: str, title: str, body: str, *, draft: bool = False, order: int = 5, summary: str = "") -> Module:
    front = {"title": title, "slug": slug, "order": order, "summary": summary, "draft": draft, "prerequisites": []}
    return save_module(Module(slug=slug), front, body, render_markdown(body), Track.objects.get(slug="basics"))


def test_the_index_is_the_databases_full_text_table():
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE name = %s", [search.TABLE])
        assert "USING fts5" in cursor.fetchone()[0]


def test_a_word_in_a_lesson_body_finds_it_with_a_link_to_its_section(client, course):
    assert results(client, "queries") == ["/modules/cache/#what-is-cached"]  # in a callout of that section
    found = results(client, "training")  # only in intro's body ("Training happens once.")
    assert found == ["/modules/intro/#why-it-matters"]
    html = client.get(URL, {"q": "training"}).content.decode()
    assert "<mark>Training</mark> happens once" in html and "Introduction to inference" in html


def test_stemming_and_the_summary_count(client, course):
    assert results(client, "requests") == ["/modules/intro/#why-it-matters"]  # "request" in the body
    assert results(client, "tour")[0] == "/modules/intro/"  # the summary: the lesson's top


def test_a_glossary_term_is_found_and_links_to_its_anchor(client, course):
    add_module("glossary", "Glossary", GLOSSARY, order=9)
    assert results(client, "GQA") == ["/modules/glossary/#term-grouped-query-attention-gqa"]
    html = client.get(URL, {"q": "roofline"}).content.decode()
    assert 'href="/modules/glossary/#term-roofline"' in html and "Glossary entry" in html
    assert "attainable performance" in html


def test_a_title_hit_ranks_above_a_body_hit(client, course):
    add_module("body-hit", "Memory traffic", "## Details\n\nSome say the scheduler decides everything here.\n", order=6)
    add_module("title-hit", "The scheduler", "## Details\n\nIt picks the next requests.\n", order=7)
    found = results(client, "scheduler")
    assert [u.split("#")[0] for u in found] == ["/modules/title-hit/", "/modules/body-hit/"]


def test_drafts_are_hidden_from_students_but_not_from_instructors(client, course, instructor):
    assert Module.objects.get(slug="batching").draft
    assert results(client, "swaps") == []  # only in the draft's body
    assert results(client, "continuous batching") == []
    client.force_login(instructor)
    assert results(client, "swaps") == ["/modules/batching/"]


def test_publishing_and_unpublishing_updates_what_students_find(client, course, instructor):
    author = Client()
    author.force_login(instructor)
    author.post(reverse("authoring:publish", args=["batching"]), {"draft": "0"})
    assert results(client, "swaps") == ["/modules/batching/"]
    author.post(reverse("authoring:publish", args=["batching"]), {"draft": "1", "confirm": "unpublish"})
    assert results(client, "swaps") == []


def test_a_draft_glossary_hides_its_terms(client, course):
    add_module("glossary", "Glossary", GLOSSARY, order=9, draft=True)
    assert results(client, "GQA") == []


def test_the_index_follows_an_edit_in_the_editor(client, course, instructor):
    author = Client()
    author.force_login(instructor)
    assert results(client, "zeppelin") == []
    data = {"title": "Caching", "short_title": "", "slug": "cache", "track": Track.objects.get(slug="basics").pk,
            "order": 2, "prerequisites": "intro", "summary": "", "action": "save",
            "source": "## Airships\n\nA zeppelin carries its keys and values.\n"}
    response = save_live(author, "cache", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert results(client, "zeppelin") == ["/modules/cache/#airships"]
    assert results(client, "tokens") == []  # the old text is gone from the index


def test_deleting_a_module_removes_its_rows(client, course):
    module = add_module("doomed", "Doomed lesson", "Albatross.\n")
    assert results(client, "albatross") == ["/modules/doomed/"]
    module.delete()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {search.TABLE} WHERE module_id = %s", [module.pk])
        assert cursor.fetchone()[0] == 0
    assert results(client, "albatross") == []


def test_rebuild_command_restores_a_lost_index(client, course):
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {search.TABLE}")
    assert results(client, "training") == []
    call_command("rebuild_search_index", verbosity=0)
    assert results(client, "training") == ["/modules/intro/#why-it-matters"]


@pytest.mark.parametrize("q", ['"', 'AND (', '"unbalanced', "NEAR(", "*", "cache*", "^inference", "a OR", "NOT",
                               "'; DROP TABLE courseapp_module; --", "col:value", "{title}: x", "(((", "-", "\x00",
                               "inference AND", "Training -- once", "\u00e9t\u00e9", "日本語"])
def test_query_syntax_in_the_input_never_breaks_the_page(client, course, q):
    response = client.get(URL, {"q": q})
    assert response.status_code == 200
    assert Module.objects.filter(slug="intro").exists()


def test_operators_are_plain_words():
    assert search.fts5_query(search.query_terms('inference AND (" NEAR cache*')) == \
        '"inference" AND "AND" AND "NEAR" AND "cache"*'
    assert search.tsquery(search.query_terms("Q&K | !V:*")) == "q & k & v:*"


def test_a_very_long_query_is_capped(client, course):
    response = client.get(URL, {"q": "training " * 2000})
    assert response.status_code == 200
    html = response.content.decode()
    assert "Only the first 200 characters" in html
    assert len(search.query_terms("word " * 500)) == search.MAX_TERMS


def test_an_empty_query_gets_a_prompt(client, course):
    for params in ({}, {"q": ""}, {"q": "   "}):
        response = client.get(URL, params)
        assert response.status_code == 200
        assert "Type a word or two" in response.content.decode()
    assert "no letters or digits" in client.get(URL, {"q": '"(*)"'}).content.decode()


def test_no_result_says_so(client, course):
    assert "Nothing in the lessons or the glossary matches" in client.get(URL, {"q": "xylophone"}).content.decode()


def test_markup_in_the_query_is_escaped(client, course):
    q = '<script>alert(1)</script><img src=x onerror=alert(2)>"training'
    html = client.get(URL, {"q": q}).content.decode()
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<mark>") >= 1  # the one real word was still searched and marked


def test_markup_in_lesson_text_is_escaped_in_snippets(client, course):
    add_module("code-talk", "Code talk", "Write `<b>bold</b>` and &lt;i&gt; as text: ocelot.\n")
    html = client.get(URL, {"q": "ocelot"}).content.decode()
    snippet = re.search(r'<p class="search-result-snippet">(.*?)</p>', html, re.S).group(1)
    assert "<b>" not in snippet and "&lt;b&gt;bold&lt;/b&gt;" in snippet and "<mark>ocelot</mark>" in snippet


def test_highlight_markers_cannot_be_forged():
    text = f"a {search.MARK_START}<b>x</b>{search.MARK_END} {search.MARK_END}b{search.MARK_START}"
    assert str(search.marked(text)) == "a <mark>&lt;b&gt;x&lt;/b&gt;</mark> b<mark></mark>"
    assert search.clean(text) == "a <b>x</b> b"


def test_demos_code_and_scripts_are_not_indexed():
    sections = search.html_sections(
        '<p>intro</p><h2 id="one">One</h2><p>kept <em>words</em></p><pre><code>x = 1</code></pre>'
        '<div class="demo-embed"><section class="ilab-demo"><h3 class="ilab-demo__title">Demo</h3>'
        '<script type="application/json">{"secret": 1}</script></section></div><h3 id="two">Two</h3><p>more</p>')
    assert sections == [("", "", "intro"), ("one", "One", "kept words"), ("two", "Two", "more")]


def test_the_nav_has_an_accessible_search_form(client, course):
    html = client.get(reverse("courseapp:index")).content.decode()
    form = re.search(r'<form class="site-search"[^>]*>.*?</form>', html, re.S).group(0)
    assert 'role="search"' in form and f'action="{URL}"' in form and 'method="get"' in form
    assert '<label for="site-search-q"' in form and 'id="site-search-q"' in form and 'name="q"' in form


def test_the_real_course_is_searchable(client):
    from courseapp.loader import load_course

    load_course(ROOT / "content")
    found = results(client, "block table")
    assert "/modules/glossary/#term-block-table" in found
    assert any(u.startswith("/modules/paged-attention/#") for u in found)
    assert results(client, "speculative decoding")[0].startswith(("/modules/speculative-decoding/",
                                                                  "/modules/glossary/#term-speculative-decoding"))


POSTGRES_CHECKS = r"""
import django, re
django.setup()
from django.core.management import call_command
from django.db import connection
from django.test import Client
from courseapp.models import Module

assert connection.vendor == "postgresql", connection.vendor
call_command("migrate", verbosity=0)
call_command("loadcourse", verbosity=0)
client = Client()
def links(q):
    r = client.get("/search/", {"q": q})
    assert r.status_code == 200, (q, r.status_code)
    return re.findall(r'<h2 class="search-result-title"><a href="([^"]+)"', r.content.decode()), r.content.decode()
found, html = links("block table")
assert "/modules/glossary/#term-block-table" in found, found
assert "<mark>" in html
found, _ = links("quantiz")
assert found and found[0].split("#")[0] in ("/modules/quantization/", "/modules/glossary/"), found
for q in ['"', "AND (", "!", "a & | b", ":*", "'", "\\", "the", "x" * 400]:
    links(q)
Module.objects.filter(slug="kv-cache").update(draft=True)
found, _ = links("kv cache")
assert not any(u.startswith("/modules/kv-cache/") for u in found), found
kv = Module.objects.get(slug="kv-cache")
kv.draft = False
kv.source = kv.source + "\n\nA zeppelin note.\n"
from courseapp.rendering import render_markdown
kv.apply_render(render_markdown(kv.source))
kv.save()
found, _ = links("zeppelin")
assert found and found[0].startswith("/modules/kv-cache/"), found
call_command("rebuild_search_index", verbosity=0)
assert links("zeppelin")[0], "rebuild lost rows"
call_command("migrate", "courseapp", "0004", verbosity=0)
call_command("migrate", verbosity=0)
assert links("zeppelin")[0], "re-migrating did not rebuild the index"
print("postgres search ok")
"""


@pytest.mark.integration
def test_search_on_postgresql(postgres_url, tmp_path):
    """The same search through PostgreSQL's full-text search (skipped without PostgreSQL's server binaries)."""
    env = {**os.environ, "DATABASE_URL": postgres_url, "DJANGO_SETTINGS_MODULE": "inferencelab.settings",
           "MEDIA_ROOT": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", POSTGRES_CHECKS], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "postgres search ok" in out.stdout
