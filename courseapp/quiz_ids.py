"""Stable ids for quiz questions and choices, so answers and statistics follow a question, not its place.

Every question and choice of a quiz carries an `id` (``id: q-3fa9c1`` in the quiz YAML). An author may write
one; a missing id is generated from the text (``q-`` / ``c-`` and six hex digits of its SHA-1, with ``-2``,
``-3`` … on a clash), so the same file always gets the same ids, and `with_quiz_ids` writes the generated ids
into the Markdown when a module is saved, loaded or exported: from then on the id stays with the question
whatever its text or place becomes. Question ids are unique in a module, choice ids in their question.

Ids start with a letter: stored answers from before ids existed were keyed by position ("1", "2" …), which
can never be mistaken for an id.
"""
from __future__ import annotations

import hashlib
import re

from .content_error import ContentError

ID_RE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
ID_HINT = "an id is a lowercase letter followed by up to 39 lowercase letters, digits or '-', e.g. q-cache-size"


def generated_id(prefix: str, text: str, taken: set[str], suffixes: dict[str, int] | None = None) -> str:
    """`prefix` + a digest of `text`, made unique against `taken` (which it joins). `suffixes`, kept across
    calls with the same `taken`, remembers the last number tried per digest, so that the search for a free
    `-N` resumes there (ids are never freed): n equal texts then cost n steps, not n²/2."""
    base = f"{prefix}-{hashlib.sha1(text.encode('utf-8')).hexdigest()[:6]}"
    n = suffixes.get(base, 1) if suffixes is not None else 1
    candidate = base if n == 1 else f"{base}-{n}"
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    taken.add(candidate)
    if suffixes is not None:
        suffixes[base] = n
    return candidate


def assign_ids(items: list, prefix: str) -> None:
    """Give every item (with `.id`, `.text`, `.generated`) an id: written ones first, so a generated id never
    takes one an author wrote later in the list. Duplicate written ids are checked by the parser."""
    taken = {item.id for item in items if item.id}
    suffixes: dict[str, int] = {}
    for item in items:
        if not item.id:
            item.id = generated_id(prefix, item.text, taken, suffixes)
            item.generated = True


def _insert_id(line: str, column: int, item_id: str) -> list[str]:
    """The source line of a mapping that starts at `column`, with `id: …` as its first key."""
    if line[column:column + 1] == "{":  # a flow mapping: {question: …, choices: […]}
        return [f"{line[:column + 1]}id: {item_id}, {line[column + 1:]}"]
    return [f"{line[:column]}id: {item_id}", " " * column + line[column:]]


def with_quiz_ids(source: str, questions: list) -> str:
    """`source` with an `id:` line for every question and choice whose id was generated (the rendering's
    `questions`); the source itself when every id is written. Lines are inserted bottom-up so the lines
    the parser reported stay valid."""
    places = [(q.line, q.column, q.id) for q in questions if q.generated]
    places += [(c.line, c.column, c.id) for q in questions for c in q.choices if c.generated]
    if not places:
        return source
    lines = source.split("\n")
    for line, column, item_id in sorted(places, reverse=True):
        lines[line - 1:line] = _insert_id(lines[line - 1], column, item_id)
    return "\n".join(lines)


def with_stable_ids(source: str, rendered, render):
    """(`source` with every quiz id written in, its rendering by `render`): what a save, a load or an export
    stores.

    The text with the ids is rendered again and must give the same quiz with every id now written; when it
    does not (the quiz is nested where a line cannot simply be inserted), a ContentError asks for the ids.
    """
    written = with_quiz_ids(source, rendered.questions)
    if written == source:
        return source, rendered
    try:
        again = render(written)
    except ContentError:
        again = None

    def ids(questions):
        return [(q.id, [c.id for c in q.choices]) for q in questions]

    still_generated = again is None or any(q.generated or any(c.generated for c in q.choices)
                                           for q in again.questions)
    if still_generated or ids(again.questions) != ids(rendered.questions):
        raise ContentError("the quiz ids could not be written into the text: give every question and choice "
                           "an 'id:' line by hand (e.g. 'id: q-cache-size')", rendered.questions[0].line)
    return written, again
