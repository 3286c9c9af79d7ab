"""The Markdown parser and the sanitizer every lesson text goes through, and the render rules for what needs
trusted HTML (math as MathML, highlighted code, directive slots): each rule hands its HTML to the render's
annotator (`env["annotator"]`) as a placeholder that is filled in after sanitizing.
"""
from __future__ import annotations

import re
from functools import lru_cache

import nh3
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from mdit_py_plugins.colon_fence import colon_fence_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin

from . import highlight, latex
from .content_error import ContentError

# Elements whose whole content the sanitizer removes: left open, they would swallow the rest of the page.
RAW_TEXT_OPEN_RE = re.compile(r"<(script|style)\b", re.I)
RAW_TEXT_CLOSE_RE = re.compile(r"</(script|style)\s*>", re.I)
CALLOUT_KINDS = {"note": "Note", "warning": "Warning"}
CODE_LANGUAGES = {
    "bash", "c", "console", "cpp", "css", "diff", "html", "javascript", "js", "json", "python", "py",
    "shell", "sh", "sql", "text", "toml", "typescript", "ts", "yaml", "yml", "cuda", "rust", "go",
}
ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
    "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "mark",
    "ol", "p", "pre", "s", "samp", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td",
    "tfoot", "th", "thead", "tr", "ul", "var",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "abbr": {"title"},
    "img": {"src", "alt", "title", "width", "height"},
    "ol": {"start"},
    "th": {"style"},
    "td": {"style"},
}
# Ids and cue ids come from the annotator only: it writes them under per-render attribute names
# (`_Annotator.id_attr`/`cue_attr`, with a secret nonce) that the sanitizer lets through and renames
# afterwards, while an `id` or `data-cue` typed in raw HTML is dropped (it could clobber page ids or forge cues).
ANNOTATED_TAGS = ("p", "li", "h1", "h2", "h3", "h4", "h5", "h6")
ALLOWED_CLASSES = {
    "div": {"callout", "callout-note", "callout-warning"},
    "p": {"callout-label"},
    "code": {f"language-{lang}" for lang in CODE_LANGUAGES},
}


@lru_cache(maxsize=1)
def markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.use(colon_fence_plugin)
    md.add_render_rule("colon_fence", _render_directive)
    # As in Pandoc: `$5 and $10` is money, not math (a `$` next to a digit never opens or closes a formula), and
    # neither is "a $ sign" (an opening `$` is followed, a closing one preceded, by a non-space).
    md.use(dollarmath_plugin, allow_labels=False, allow_space=False, allow_digits=False, double_inline=True)
    for rule in MATH_TOKENS:
        md.add_render_rule(rule, _render_math)
    md.add_render_rule("fence", _render_code)
    md.add_render_rule("code_block", _render_code)
    return md


def sanitize(html: str, annotations: tuple[str, ...] = ()) -> str:
    """nh3 with the lesson allowlist; `annotations` are the annotator's attribute names to keep."""
    attributes = {tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()}
    for tag in ANNOTATED_TAGS if annotations else ():
        attributes.setdefault(tag, set()).update(annotations)
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=attributes,
        allowed_classes=ALLOWED_CLASSES,
        tag_attribute_values={"div": {"role": {"note"}}},
        filter_style_properties={"text-align"},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer",
    )


MATH_TOKENS = ("math_inline", "math_inline_double", "math_block")


def spoken_or_source(formula: str) -> str:
    try:
        return latex.spoken(formula)
    except latex.MathError:
        return ""


def line_of(formula: str, lines: list[str], span) -> int:
    """The 1-based line (within `lines`) where `formula` starts, searched in the block's span."""
    first, last = span or (0, len(lines))
    head = formula.strip().split("\n", 1)[0]
    return next((n + 1 for n in range(first, min(last, len(lines))) if head and head in lines[n]), first + 1)


def _render_math(self, tokens, idx, options, env) -> str:
    """MathML, through a placeholder: the sanitizer knows no MathML, and `latex.to_mathml` is already safe."""
    token = tokens[idx]
    display = token.type == "math_block"
    if "mathml" not in token.meta:  # a quiz text's formula, converted here: it counts as the lesson's
        env["annotator"].budget.spend("formulas")
    mathml = token.meta.get("mathml") or latex.to_mathml(token.content, display=display)
    if display:
        cue = token.attrGet(env["annotator"].cue_attr)
        # tabindex: a formula wider than a phone scrolls sideways, and the keyboard must be able to scroll it.
        mathml = format_html('<div class="math-display" tabindex="0"{}>{}</div>',
                             format_html(' data-cue="{}"', cue) if cue else "", mark_safe(mathml))  # noqa: S308
    marker = env["annotator"].inline_slot(mathml)
    return f"{marker}\n" if display else marker


def _render_code(self, tokens, idx, options, env) -> str:
    """Fenced and indented code, highlighted by Pygments (escaped by it, so trusted) via a placeholder."""
    token = tokens[idx]
    language = highlight.language_of(token.info) if token.type == "fence" else ""
    if "annotator" not in env:
        return RendererHTML.fence(self, tokens, idx, options, env)
    return env["annotator"].inline_slot(highlight.code_html(token.content, language)) + "\n"


def _render_directive(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    if "callout" in token.meta:
        kind = token.meta["callout"]
        inner = self.render(token.meta["children"], options, env)
        return (f'<div class="callout callout-{kind}" role="note">'
                f'<p class="callout-label"><strong>{CALLOUT_KINDS[kind]}</strong></p>\n{inner}</div>\n')
    return token.meta.get("slot", "") + "\n"


def inline_text(token) -> str:
    """The words of an inline token, as a reader (and the narrator) says them: math as words."""
    parts: list[str] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in MATH_TOKENS:
            parts.append(child.meta.get("spoken") or spoken_or_source(child.content))
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return re.sub(r"\s+", " ", "".join(parts)).strip()


def check_raw_text_closed(html: str, lines: list[str]) -> None:
    """A `<script>` or `<style>` left open would make the sanitizer drop everything after it, silently."""
    position = 0
    while (opened := RAW_TEXT_OPEN_RE.search(html, position)) is not None:
        closed = RAW_TEXT_CLOSE_RE.search(html, opened.end())
        if closed is None:
            tag = opened[1].lower()
            line = next((n for n in range(len(lines), 0, -1) if f"<{tag}" in lines[n - 1].lower()), 1)
            raise ContentError(f"<{tag}> is opened but never closed: everything after it would vanish from the "
                               f"page. Remove it (lessons cannot carry {tag}s).", line)
        position = closed.end()
