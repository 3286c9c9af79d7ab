"""Site search over lessons and glossary entries, with the database's own full-text search.

The index is one table, ``courseapp_search``, created by migration 0005 for the database in use:

* SQLite: an FTS5 virtual table (porter stemming, diacritics folded), ranked with ``bm25`` and cut into
  snippets with FTS5's ``snippet``/``highlight``;
* PostgreSQL: a plain table whose ``document`` column is a stored, weighted ``tsvector`` (title A, section
  heading B, text C) with a GIN index, ranked with ``ts_rank`` and cut with ``ts_headline``.

A row is a section of a lesson (module title, the section's heading and id, its plain text: demos,
calculators, code and scripts left out) or a glossary entry (term, definition, ``#term-…`` anchor).
Every module is indexed, drafts included; what a visitor may see is decided at query time by joining the
module table (`ModuleQuerySet.visible_to`'s rule), so a draft can never leak through a stale row.
Rows are rebuilt whenever a module is saved (search/signals.py: loading, editing, publishing, restoring) and
dropped when it is deleted; ``manage.py rebuild_search_index`` rebuilds everything.

User input never reaches the query syntax of either engine: the words of the query (letters and digits)
are each quoted (FTS5) or passed as plain lexemes (``to_tsquery``), so ``"``, ``AND (`` or ``NEAR(`` are
just characters. Results are escaped, then the engine's match markers (private-use characters stripped
from the indexed text) become ``<mark>`` elements.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from html.parser import HTMLParser

from django.db import DatabaseError, connection, transaction
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from courseapp.glossary import GLOSSARY_SLUG, parse_terms
from courseapp.models import Module
from serverprofile import figures as server_figures

logger = logging.getLogger(__name__)

TABLE = "courseapp_search"
MAX_QUERY_CHARS = 200
MAX_TERMS = 12
MAX_RESULTS = 20
CANDIDATES = 200  # rows fetched before keeping the best section of each lesson
SNIPPET_WORDS = 24
MARK_START, MARK_END = "\ue000", "\ue001"  # private use: never in indexed text (stripped), so never forged
WORD_RE = re.compile(r"[^\W_]+")
SPACE_RE = re.compile(r"\s+")
KIND_LESSON, KIND_TERM = "lesson", "term"

# Weights: a hit in a title outranks one in a heading, which outranks one in the text.
SQLITE_WEIGHTS = (10.0, 4.0, 1.0)
PG_CONFIG = "english"

SQLITE_CREATE = f"""
CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING fts5(
    title, heading, body,
    kind UNINDEXED, module_id UNINDEXED, anchor UNINDEXED, ord UNINDEXED,
    tokenize = 'porter unicode61 remove_diacritics 2'
)"""
POSTGRES_CREATE = [
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        id bigserial PRIMARY KEY,
        module_id bigint NOT NULL,
        kind varchar(10) NOT NULL,
        anchor varchar(255) NOT NULL DEFAULT '',
        ord integer NOT NULL DEFAULT 0,
        title text NOT NULL DEFAULT '',
        heading text NOT NULL DEFAULT '',
        body text NOT NULL DEFAULT '',
        document tsvector GENERATED ALWAYS AS (
            setweight(to_tsvector('{PG_CONFIG}', title), 'A')
            || setweight(to_tsvector('{PG_CONFIG}', heading), 'B')
            || setweight(to_tsvector('{PG_CONFIG}', body), 'C')
        ) STORED
    )""",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_document ON {TABLE} USING gin (document)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_module ON {TABLE} (module_id)",
]
# No foreign key to courseapp_module on purpose: Django's flush (TRUNCATE on PostgreSQL) knows nothing of this
# table and would refuse to empty a referenced one. Orphan rows are harmless: every query joins the module.


def supported(conn=connection) -> bool:
    return conn.vendor in ("sqlite", "postgresql")


def create_table(conn=connection) -> None:
    with conn.cursor() as cursor:
        if conn.vendor == "sqlite":
            cursor.execute(SQLITE_CREATE)
        elif conn.vendor == "postgresql":
            for statement in POSTGRES_CREATE:
                cursor.execute(statement)


def drop_table(conn=connection) -> None:
    if supported(conn):
        with conn.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {TABLE}")


def table_exists(conn=connection) -> bool:
    return supported(conn) and TABLE in conn.introspection.table_names()


# --- What is indexed -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    kind: str
    anchor: str
    ord: int
    title: str
    heading: str
    body: str


def clean(text: str) -> str:
    """Plain text for the index: one space between words, no highlight markers."""
    return SPACE_RE.sub(" ", text.replace(MARK_START, "").replace(MARK_END, "")).strip()


SKIP_TAGS = {"script", "style", "noscript", "pre", "svg", "template", "button", "select", "textarea", "form"}
SKIP_CLASSES = {"demo-embed", "ilab-demo", "calculator"}
SECTION_TAGS = {"h2", "h3", "h4"}
BLOCK_TAGS = {"p", "li", "ul", "ol", "div", "section", "table", "tr", "td", "th", "blockquote", "dt", "dd",
              "figure", "figcaption", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "details", "summary"}
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Sections(HTMLParser):
    """Split rendered lesson HTML into (heading id, heading text, plain text) at every h2–h4 with an id."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.sections: list[list] = [["", "", []]]
        self.skip = 0
        self.heading: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag in VOID_TAGS:
            self._space()
            return
        if self.skip:
            self.skip += 1
            return
        attrs = dict(attrs)
        classes = set((attrs.get("class") or "").split())
        if tag in SKIP_TAGS or classes & SKIP_CLASSES:
            self.skip = 1
            return
        if tag == "math":  # a formula is indexed as its words (rendering puts them in `alttext`), not its markup
            self.handle_data(f" {attrs.get('alttext') or ''} ")
            self.skip = 1
            return
        if tag in SECTION_TAGS and attrs.get("id"):
            self.sections.append([attrs["id"], "", []])
            self.heading = []
        elif tag in BLOCK_TAGS:
            self._space()

    def handle_endtag(self, tag):
        if tag in VOID_TAGS:
            return
        if self.skip:
            self.skip -= 1
            return
        if tag in SECTION_TAGS and self.heading is not None:
            self.sections[-1][1] = "".join(self.heading)
            self.heading = None
        elif tag in BLOCK_TAGS:
            self._space()

    def handle_data(self, data):
        if self.skip:
            return
        (self.heading if self.heading is not None else self.sections[-1][2]).append(data)

    def _space(self):
        if self.heading is None:
            self.sections[-1][2].append(" ")


def html_sections(page_html: str) -> list[tuple[str, str, str]]:
    """(id, heading, text) for the part before the first heading and every section after one."""
    parser = _Sections()
    parser.feed(page_html)
    parser.close()
    return [(anchor, clean(heading), clean("".join(parts))) for anchor, heading, parts in parser.sections]


def module_entries(module) -> list[Entry]:
    """The rows of one module (works on historical models too: it reads fields only)."""
    title = clean(module.title)
    summary = clean(module.summary or "")
    if module.slug == GLOSSARY_SLUG:
        entries = [Entry(KIND_LESSON, "", 0, title, "", summary)]
        entries += [Entry(KIND_TERM, term.anchor, i, clean(term.term), "", clean(term.definition))
                    for i, term in enumerate(parse_terms(module.source or ""), start=1)]
        return entries
    text = server_figures.spoken(module.html or "") if "{{" in (module.html or "") else (module.html or "")
    entries = []
    for i, (anchor, heading, body) in enumerate(html_sections(text)):
        if i == 0:
            body = clean(f"{summary} {body}")
        elif not (heading or body):
            continue
        entries.append(Entry(KIND_LESSON, anchor, i, title, heading, body))
    return entries


def _insert(cursor, conn, module_id: int, entries: list[Entry]) -> None:
    if not entries:
        return
    columns = "title, heading, body, kind, module_id, anchor, ord"
    cursor.executemany(
        f"INSERT INTO {TABLE} ({columns}) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        [(e.title, e.heading, e.body, e.kind, module_id, e.anchor, e.ord) for e in entries],
    )


def reindex_module(module_id: int, conn=connection) -> None:
    """Replace a module's rows with what it holds now (no-op before migration 0005 or on other databases)."""
    if not table_exists(conn):
        return
    module = Module.objects.using(conn.alias).filter(pk=module_id).only(
        "slug", "title", "summary", "source", "html").first()
    with transaction.atomic(using=conn.alias), conn.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE module_id = %s", [module_id])
        if module is not None:
            _insert(cursor, conn, module_id, module_entries(module))


def remove_module(module_id: int, conn=connection) -> None:
    if table_exists(conn):
        with conn.cursor() as cursor:
            cursor.execute(f"DELETE FROM {TABLE} WHERE module_id = %s", [module_id])


def rebuild(modules=None, conn=connection) -> int:
    """Empty the index and index every module (or `modules`, e.g. a migration's historical queryset)."""
    if not supported(conn):
        return 0
    if modules is None:
        modules = Module.objects.using(conn.alias).all()
    count = 0
    with transaction.atomic(using=conn.alias), conn.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE}")
        for module in modules.only("slug", "title", "summary", "source", "html").iterator():
            entries = module_entries(module)
            _insert(cursor, conn, module.pk, entries)
            count += len(entries)
    return count


# --- Queries ---------------------------------------------------------------------------------------------------

def query_terms(q: str) -> list[str]:
    """The words of a query: letters and digits only (every operator and quote of either syntax dropped)."""
    return WORD_RE.findall(q[:MAX_QUERY_CHARS])[:MAX_TERMS]


def fts5_query(terms: list[str], any_term: bool = False) -> str:
    """An FTS5 MATCH expression: each word a quoted string (its own syntax cannot apply), the last a prefix."""
    quoted = ['"' + t.replace('"', '""') + '"' for t in terms]  # WORD_RE admits no '"'; doubled all the same
    if quoted:
        quoted[-1] += "*"
    return (" OR " if any_term else " AND ").join(quoted)


def tsquery(terms: list[str], any_term: bool = False) -> str:
    """A `to_tsquery` expression of plain lexemes (letters and digits only), the last a prefix."""
    parts = [t.lower() for t in terms]
    if parts:
        parts[-1] += ":*"
    return (" | " if any_term else " & ").join(parts)


def marked(text: str) -> SafeString:
    """Escape everything, then turn the engine's markers into <mark> (balanced: a cut snippet may drop one)."""
    out, open_ = [], False
    for piece in re.split(f"([{MARK_START}{MARK_END}])", text or ""):
        if piece == MARK_START and not open_:
            out.append("<mark>")
            open_ = True
        elif piece == MARK_END and open_:
            out.append("</mark>")
            open_ = False
        elif piece not in (MARK_START, MARK_END):
            out.append(escape(piece))
    if open_:
        out.append("</mark>")
    return mark_safe("".join(out))


@dataclass
class Hit:
    kind: str
    url: str
    title: SafeString
    heading: SafeString
    snippet: SafeString
    module_title: str

    @property
    def kind_label(self) -> str:
        return "Glossary entry" if self.kind == KIND_TERM else "Lesson"


def _sqlite_rows(cursor, match: str, show_drafts: bool) -> list[tuple]:
    weights = ", ".join(str(w) for w in SQLITE_WEIGHTS)
    cursor.execute(
        f"""SELECT {TABLE}.kind, {TABLE}.module_id, {TABLE}.anchor, m.slug, m.title,
                   highlight({TABLE}, 0, %s, %s), highlight({TABLE}, 1, %s, %s),
                   snippet({TABLE}, 2, %s, %s, '…', %s)
            FROM {TABLE} JOIN courseapp_module AS m ON m.id = {TABLE}.module_id
            WHERE {TABLE} MATCH %s AND (%s OR NOT m.draft)
            ORDER BY bm25({TABLE}, {weights}), CAST({TABLE}.ord AS INTEGER)
            LIMIT {CANDIDATES}""",
        [MARK_START, MARK_END, MARK_START, MARK_END, MARK_START, MARK_END, SNIPPET_WORDS, match, show_drafts],
    )
    return cursor.fetchall()


def _postgres_rows(cursor, expression: str, show_drafts: bool) -> list[tuple]:
    options = (f'StartSel="{MARK_START}", StopSel="{MARK_END}", MaxWords={SNIPPET_WORDS}, MinWords=10, '
               f'ShortWord=2, MaxFragments=2, FragmentDelimiter=" … "')
    whole = f'StartSel="{MARK_START}", StopSel="{MARK_END}", HighlightAll=true'
    cursor.execute(
        f"""WITH q AS (SELECT to_tsquery('{PG_CONFIG}', %s) AS query)
            SELECT s.kind, s.module_id, s.anchor, m.slug, m.title,
                   ts_headline('{PG_CONFIG}', s.title, q.query, %s),
                   ts_headline('{PG_CONFIG}', s.heading, q.query, %s),
                   ts_headline('{PG_CONFIG}', s.body, q.query, %s)
            FROM {TABLE} AS s JOIN courseapp_module AS m ON m.id = s.module_id, q
            WHERE s.document @@ q.query AND (%s OR NOT m.draft)
            ORDER BY ts_rank(s.document, q.query) DESC, s.ord
            LIMIT {CANDIDATES}""",
        [expression, whole, whole, options, show_drafts],
    )
    return cursor.fetchall()


def _hits(rows: list[tuple]) -> list[Hit]:
    """Best row first; one hit per lesson (its best section), one per glossary entry."""
    hits, seen = [], set()
    for kind, module_id, anchor, slug, module_title, title, heading, snippet in rows:
        key = (module_id, anchor) if kind == KIND_TERM else (module_id, None)
        if key in seen:
            continue
        seen.add(key)
        url = reverse("courseapp:module", args=[slug]) + (f"#{anchor}" if anchor else "")
        hits.append(Hit(kind, url, marked(title), marked(heading), marked(snippet), module_title))
        if len(hits) == MAX_RESULTS:
            break
    return hits


def search(q: str, *, show_drafts: bool = False, conn=connection) -> list[Hit]:
    """Lessons and glossary entries matching every word of `q` (or, when none does, any word), best first."""
    terms = query_terms(q)
    if not terms or not table_exists(conn):
        return []
    for any_term in (False, True) if len(terms) > 1 else (False,):
        try:
            with transaction.atomic(using=conn.alias), conn.cursor() as cursor:
                if conn.vendor == "sqlite":
                    rows = _sqlite_rows(cursor, fts5_query(terms, any_term), show_drafts)
                else:
                    rows = _postgres_rows(cursor, tsquery(terms, any_term), show_drafts)
        except DatabaseError:  # should not happen (no syntax reaches the engine); a search never 500s
            logger.exception("search failed for %r", q)
            return []
        if rows:
            return _hits(rows)
    return []
