"""What one lesson render may cost, so that a preview request's work is bounded whatever text it sends.

The renderer's own steps are linear in the text (issue 43: 200 KB of `$a` once took 77 s in quadratic
placeholder filling); these caps bound what stays costly per item even when linear, and what a library
does in more than linear time:

* the text (`MAX_SOURCE_CHARS`): every other cost grows with it, and its lines (`MAX_LINES`): markdown-it-py
  spends some 40 µs on each block, so 200 KB of one-line list items or headings would take seconds;
* formulas (`MAX_FORMULAS`, quiz texts included): latex2mathml parses each one twice (MathML, words);
* directives (`MAX_DIRECTIVES`): a demo embed is validated and rendered from a template, about 0.7 ms;
* callouts inside callouts (`MAX_CALLOUT_DEPTH`): each level parses its body again;
* HTML nesting (`MAX_HTML_DEPTH`): the sanitizer (html5ever, in nh3) looks through the open elements at
  block tags, so its time grows with tags × depth (4 s for 200 KB of unclosed `<div>`s).

Each cap is many times what a real lesson uses (the longest is 31 KB, with a handful of directives and
formulas); a refusal is a `ContentError` for the author, never a silently shortened lesson. A render inside
a render (a quiz text inside a lesson) spends the outer render's budget (`scoped`, `current`).
"""
from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from .content_error import ContentError

# 5 times the longest lesson. markdown-it-py alone spends up to 11 µs a character on its worst inline shapes (a run
# of "[", "*_" alternating): at 150,000 characters that stays under about 1.7 s of CPU on the 2-core AMD EPYC.
MAX_SOURCE_CHARS = 150_000
MAX_LINES = 10_000
MAX_FORMULAS = 2_000
MAX_DIRECTIVES = 300
MAX_CALLOUT_DEPTH = 4
MAX_HTML_DEPTH = 200

CAPS = {
    "formulas": (MAX_FORMULAS, "formulas ($…$ or $$…$$)"),
    "directives": (MAX_DIRECTIVES, "directives (:::{demo}, :::{calculator}, :::{callout}, :::{quiz})"),
}
# Only the tag name is matched (never on to a `>`), so a text of many `<` costs one step per `<`.
TAG_RE = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)")
# Not counted: void elements (never open) and those whose end tag is optional (a `<li>` or `<p>` closes the
# one before), so hand-written lists that leave them open are not deep. The count stays within a few times
# the sanitizer's real depth, which is all that bounding its cost needs.
UNCOUNTED_TAGS = frozenset({
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr",
    "p", "li", "dt", "dd", "tr", "td", "th", "thead", "tbody", "tfoot", "option", "optgroup", "rp", "rt",
    "colgroup", "caption", "html", "head", "body",
})

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class Budget:
    """What one render has spent so far."""

    spent: dict[str, int] = field(default_factory=dict)  # by kind of `CAPS`
    callout_depth: int = 0  # callouts open around the one being read

    def spend(self, kind: str, line: int | None = None) -> None:
        """Count one more `kind`; past its cap, a ContentError (at `line`)."""
        cap, what = CAPS[kind]
        self.spent[kind] = self.spent.get(kind, 0) + 1
        if self.spent[kind] > cap:
            raise ContentError(f"a lesson holds at most {cap:,} {what}: split it into modules", line)

    @contextmanager
    def callout(self, line: int) -> Iterator[None]:
        """Around reading a callout's body; a ContentError (at `line`) when it is nested too deep."""
        if self.callout_depth >= MAX_CALLOUT_DEPTH:
            raise ContentError(f"callouts nest at most {MAX_CALLOUT_DEPTH} deep (each level is read again): close "
                               "the callout around this one first", line)
        self.callout_depth += 1
        try:
            yield
        finally:
            self.callout_depth -= 1


_active: ContextVar[Budget | None] = ContextVar("render_budget", default=None)


def scoped(render: Callable[P, R]) -> Callable[P, R]:
    """`render` spends one budget per call, or, called inside another render, that render's budget."""

    @functools.wraps(render)
    def within_budget(*args: P.args, **kwargs: P.kwargs) -> R:
        if _active.get() is not None:
            return render(*args, **kwargs)
        token = _active.set(Budget())
        try:
            return render(*args, **kwargs)
        finally:
            _active.reset(token)

    return within_budget


def current() -> Budget:
    """The budget of the render under way (a fresh one outside any `scoped` render)."""
    return _active.get() or Budget()


def check_source(body: str) -> None:
    """A ContentError when `body` is longer than a render takes (the course's longest lesson has 31,000
    characters on 221 lines)."""
    if len(body) > MAX_SOURCE_CHARS:
        raise ContentError(f"the lesson is {len(body):,} characters long; at most {MAX_SOURCE_CHARS:,} are rendered: "
                           "split it into modules")
    lines = body.count("\n") + 1
    if lines > MAX_LINES:
        raise ContentError(f"the lesson has {lines:,} lines; at most {MAX_LINES:,} are rendered: split it into modules")


def _too_deep_at(html: str) -> int | None:
    """The offset in `html` of the tag that opens element number `MAX_HTML_DEPTH + 1` of one nest, or None."""
    depth = 0
    for match in TAG_RE.finditer(html):
        if match[2].lower() in UNCOUNTED_TAGS:
            continue
        if match[1]:
            depth = max(0, depth - 1)
        else:
            depth += 1
            if depth > MAX_HTML_DEPTH:
                return match.start()
    return None


def check_nesting(html: str, body: str) -> None:
    """A ContentError when the tags of `html` (rendered from `body`) nest deeper than the sanitizer should
    walk; at the body line where the lesson's own tags pass the cap, when they do."""
    if _too_deep_at(html) is None:
        return
    at = _too_deep_at(body)
    raise ContentError(f"HTML elements nest more than {MAX_HTML_DEPTH} levels deep: close the tags the lesson "
                       "opens (every <div> needs its </div>)", body.count("\n", 0, at) + 1 if at is not None else None)
