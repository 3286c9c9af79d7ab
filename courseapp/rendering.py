"""Markdown → sanitized lesson HTML, outline, narration cues, demos and quiz.

One renderer serves the student page, the authoring preview and the loader, so what an instructor
previews is exactly what a student gets. Pipeline:

1. markdown-it (CommonMark + tables + strikethrough + `:::` colon fences for directives + `$…$`/`$$…$$`
   math) parses the body;
2. `_Annotator` walks the tokens: heading ids, `data-cue` ids on narrated blocks (headings, paragraphs,
   list items, display math), directive parsing and validation, LaTeX conversion (errors carry the body
   line number);
3. the HTML is sanitized with nh3 (an allowlist: no scripts, event handlers or `javascript:` URLs);
4. trusted HTML produced by code (demo embeds, calculators, the quiz slot, MathML from `latex`, code
   highlighted by `highlight`) replaces unguessable placeholders *after* sanitization, so authored text can
   never smuggle such markup in.

Math is spoken as words in the narration cues (`latex.spoken`), never as LaTeX source. Every step is linear
in the text, and `render_budget` caps what one render may cost (a preview is one request's work).
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import nh3
import yaml
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.text import slugify
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from mdit_py_plugins.colon_fence import colon_fence_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin

from serverprofile import figures as server_figures

from . import demo_cues, highlight, latex, quiz_ids, render_budget, yaml_errors
from .content_error import ContentError
from .input_limits import MAX_NESTING, NumberTooLong, bounded_int, json_nesting
from .models import QUIZ_MARKER
from .safe_yaml import BoundedLoader

logger = logging.getLogger(__name__)

WORDS_PER_MINUTE = 200
# Demo validation errors caused by the environment (not by the directive): never block authoring.
ENVIRONMENT_ERRORS = {"engine_unavailable"}
CALLOUT_KINDS = {"note": "Note", "warning": "Warning"}
DIRECTIVES = ("demo", "calculator", "quiz", "callout", "lab", "exercise")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
DIRECTIVE_RE = re.compile(r"^\{(?P<kind>[^}\s]*)\}\s*(?P<rest>.*)$", re.S)
UNNARRATED_SECTIONS = {"sources", "references", "further reading", "bibliography"}
# `[text](other-module.md#part)` works on GitHub and, rewritten to the module URL, on the site.
MODULE_LINK_RE = re.compile(r"^(?:\./)?(?P<slug>[a-z0-9]+(?:-[a-z0-9]+)*)\.md(?P<anchor>#[^\s]*)?$")
RESERVED_IDS = {"main", "content", "lesson", "outline", "quiz", "player", "narration", "pager", "top"}
# A calculator NAME is the static file js/calculators/NAME.js (what the module page loads) that mounts
# itself with autoMount("NAME", ...); helper modules there (formulas.js, ui.js) are not calculators.
CALCULATOR_DIR = "js/calculators"
AUTOMOUNT_RE = re.compile(r"""^\s*autoMount\(\s*["'](?P<name>[^"']+)["']""", re.M)

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
# Elements whose whole content the sanitizer removes: left open, they would swallow the rest of the page.
RAW_TEXT_OPEN_RE = re.compile(r"<(script|style)\b", re.I)
RAW_TEXT_CLOSE_RE = re.compile(r"</(script|style)\s*>", re.I)
# The placeholders of `_Annotator.slot` and `inline_slot`, whatever the render's nonce (one compiled pattern).
SLOT_RE = re.compile(r"ilab[0-9a-f]+slot[0-9]+x|<div>slot-[0-9a-f]+-[0-9]+</div>")
ALLOWED_CLASSES = {
    "div": {"callout", "callout-note", "callout-warning"},
    "p": {"callout-label"},
    "code": {f"language-{lang}" for lang in CODE_LANGUAGES},
}


@dataclass(frozen=True)
class Cue:
    id: str
    text: str
    kind: str  # "heading" | "paragraph" | "item"

    def as_dict(self) -> dict:
        return {"id": self.id, "text": self.text, "kind": self.kind}


@dataclass
class QuizChoice:
    text: str
    text_html: str
    correct: bool
    explanation: str
    explanation_html: str
    id: str = ""  # stable: see courseapp.quiz_ids
    generated: bool = False  # the id is not in the text yet
    line: int = 0  # body line and column where the choice's mapping starts
    column: int = 0


@dataclass
class QuizQuestion:
    text: str
    text_html: str
    choices: list[QuizChoice]
    line: int
    id: str = ""
    generated: bool = False
    column: int = 0


@dataclass
class RenderedModule:
    html: str
    outline: list[dict]
    cues: list[Cue]
    questions: list[QuizQuestion]
    demos: list[dict]
    calculators: list[str]
    word_count: int
    labs: list[dict] = field(default_factory=list)  # each `:::{lab}`'s definition (labs.definition)

    @property
    def reading_minutes(self) -> int:
        return max(1, round(self.word_count / WORDS_PER_MINUTE))

    @property
    def cue_hash(self) -> str:
        return cue_hash(self.cues)


def cue_hash(cues, voice: str = "") -> str:
    """Stable hash of what the narration says (ids and texts), optionally for one voice."""
    payload = json.dumps([voice, [[c.id, c.text] for c in cues]], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


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


def render_inline(text: str) -> str:
    """Inline Markdown (quiz questions, choices, explanations) → sanitized HTML (math as MathML).

    Raises `ContentError` without a line for LaTeX that cannot be shown: the caller knows the line."""
    annotator = _Annotator(validate_demos=False)
    try:
        raw = markdown().renderInline(text, {"annotator": annotator})
    except latex.MathError as exc:
        raise ContentError(f"math: {exc}") from None
    return annotator.fill(sanitize(raw))


@render_budget.scoped
def render_markdown(body: str, *, validate_demos: bool = True) -> RenderedModule:
    """Render a module body. Raises `ContentError` (line relative to the body) on a bad directive, and past
    what one render may cost (`render_budget`)."""
    render_budget.check_source(body)
    unknown = server_figures.unknown_placeholders(body)
    if unknown:
        line, name = unknown[0]
        raise ContentError(f"'{{{{ server.{name} }}}}' is not one of this server's figures: use one of "
                           f"{', '.join(sorted(server_figures.NAMES))}", line)
    md = markdown()
    annotator = _Annotator(validate_demos=validate_demos)
    env: dict = {"annotator": annotator}
    tokens = md.parse(body, env)
    lines = body.split("\n")
    annotator.walk(tokens, lines, offset=0)
    annotator.check_step_markers()
    raw = md.renderer.render(tokens, md.options, env)
    _check_raw_text_closed(raw, lines)
    render_budget.check_nesting(raw, body)
    html = sanitize(raw, (annotator.id_attr, annotator.cue_attr))
    html = html.replace(f' {annotator.id_attr}="', ' id="').replace(f' {annotator.cue_attr}="', ' data-cue="')
    html = annotator.fill(html)
    return RenderedModule(
        html=html,
        outline=annotator.outline,
        cues=annotator.cues,
        questions=annotator.questions,
        demos=annotator.demos,
        calculators=annotator.calculators,
        word_count=annotator.word_count,
        labs=annotator.labs,
    )


def _check_raw_text_closed(html: str, lines: list[str]) -> None:
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


# --- Token walking ---------------------------------------------------------------------------


def _inline_text(token) -> str:
    """The words of an inline token, as a reader (and the narrator) says them: math as words."""
    parts: list[str] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in MATH_TOKENS:
            parts.append(child.meta.get("spoken") or _spoken_or_source(child.content))
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return re.sub(r"\s+", " ", "".join(parts)).strip()


def _rewrite_module_links(inline_token) -> None:
    for child in inline_token.children or []:
        if child.type != "link_open":
            continue
        match = MODULE_LINK_RE.match(child.attrGet("href") or "")
        if match:
            child.attrSet("href", f"/modules/{match['slug']}/{match['anchor'] or ''}")


@dataclass
class _Annotator:
    validate_demos: bool = True
    nonce: str = field(default_factory=lambda: secrets.token_hex(12))

    @property
    def id_attr(self) -> str:
        return f"data-ilab-{self.nonce}-id"

    @property
    def cue_attr(self) -> str:
        return f"data-ilab-{self.nonce}-cue"
    cues: list[Cue] = field(default_factory=list)
    outline: list[dict] = field(default_factory=list)
    questions: list[QuizQuestion] = field(default_factory=list)
    demos: list[dict] = field(default_factory=list)
    calculators: list[str] = field(default_factory=list)
    labs: list[dict] = field(default_factory=list)
    slots: dict[str, str] = field(default_factory=dict)
    word_count: int = 0
    _ids: set[str] = field(default_factory=lambda: set(RESERVED_IDS))
    _suffixes: dict[str, int] = field(default_factory=dict)  # per heading slug, the last number `_heading_id` took
    budget: render_budget.Budget = field(default_factory=render_budget.current)
    _quiz_line: int | None = None
    _silent_below: int | None = None  # heading level of a section that is not narrated (Sources)
    step_markers: list[demo_cues.StepMarker] = field(default_factory=list)

    def _cue(self, token, text: str, kind: str) -> None:
        if not text or self._silent_below is not None:
            return
        cue = Cue(id=f"c{len(self.cues) + 1}", text=server_figures.spoken(text), kind=kind)
        self.cues.append(cue)
        token.attrSet(self.cue_attr, cue.id)

    def _heading_id(self, text: str) -> str:
        """`slug`, else the first free `slug-2`, `slug-3` …: the search resumes where the last one for this slug
        stopped (ids are never freed), so a thousand equal headings cost a thousand steps, not half a million."""
        base = slugify(text) or "section"
        n = self._suffixes.get(base, 1)
        candidate = base if n == 1 else f"{base}-{n}"
        while candidate in self._ids:
            n += 1
            candidate = f"{base}-{n}"
        self._ids.add(candidate)
        self._suffixes[base] = n
        return candidate

    def slot(self, token, trusted_html: str) -> None:
        marker = f"<div>slot-{self.nonce}-{len(self.slots)}</div>"
        self.slots[marker] = trusted_html
        token.meta["slot"] = marker

    def inline_slot(self, trusted_html: str) -> str:
        """A placeholder that is plain text (so it may sit inside a paragraph) for `trusted_html`."""
        marker = f"ilab{self.nonce}slot{len(self.slots)}x"
        self.slots[marker] = trusted_html
        return marker

    def fill(self, sanitized: str) -> str:
        """Put the trusted HTML in place of its placeholders (each one once), once sanitization is done: in one
        pass over the page, as one `str.replace` per placeholder made it quadratic (issue 43)."""
        unfilled = dict(self.slots)
        return SLOT_RE.sub(lambda found: unfilled.pop(found[0], found[0]), sanitized) if unfilled else sanitized

    def _convert_math(self, tokens, lines: list[str], offset: int) -> None:
        """Convert every formula to MathML and to words up front (headings and paragraphs read their words
        before their inline token is reached); an error names the line the formula is on."""
        for token in tokens:
            formulas = [token] if token.type == "math_block" else [
                child for child in (token.children or []) if child.type in MATH_TOKENS]
            for formula in formulas:
                try:
                    self.budget.spend("formulas")
                    formula.meta["spoken"] = latex.spoken(formula.content)
                    formula.meta["mathml"] = latex.to_mathml(formula.content, display=formula.type == "math_block",
                                                             alttext=formula.meta["spoken"])
                except (latex.MathError, ContentError) as exc:  # ContentError: one formula too many
                    line = _line_of(formula.content, lines, token.map) + offset
                    raise ContentError(f"math ${formula.content.strip()[:60]}$: {exc}", line) from None

    def walk(self, tokens, lines: list[str], offset: int) -> None:
        """Annotate `tokens` parsed from `lines`; `offset` maps their line numbers to the body's."""
        self._convert_math(tokens, lines, offset)
        self._take_step_markers(tokens, offset)
        item_depth = 0
        for idx, token in enumerate(tokens):
            if token.type == "inline":
                self.word_count += len(re.findall(r"\w+", _inline_text(token)))
                _rewrite_module_links(token)
            elif token.type == "heading_open":
                text = _inline_text(tokens[idx + 1])
                heading_id = self._heading_id(text)
                token.attrSet(self.id_attr, heading_id)
                if token.tag in ("h2", "h3"):
                    self.outline.append({"id": heading_id, "text": text, "level": int(token.tag[1])})
                level = int(token.tag[1])
                if self._silent_below is not None and level <= self._silent_below:
                    self._silent_below = None
                if text.strip().lower() in UNNARRATED_SECTIONS:
                    self._silent_below = level
                if item_depth == 0:
                    self._cue(token, text, "heading")
            elif token.type == "paragraph_open" and item_depth == 0:
                self._cue(token, _inline_text(tokens[idx + 1]), "paragraph")
            elif token.type == "math_block" and item_depth == 0:
                self._cue(token, token.meta["spoken"], "paragraph")
            elif token.type == "list_item_open":
                if item_depth == 0:
                    self._cue(token, self._item_text(tokens, idx), "item")
                item_depth += 1
            elif token.type == "list_item_close":
                item_depth -= 1
            elif token.type == "colon_fence":
                self._directive(token, lines, offset)

    def _take_step_markers(self, tokens, offset: int) -> None:
        """Narration step markers ({step}`demo N`) out of the text, before any cue reads it (`demo_cues`)."""
        for token in tokens:
            if token.type != "inline" or demo_cues.ROLE not in token.content:
                continue
            line = (token.map[0] + 1 if token.map else 1) + offset
            try:
                found = demo_cues.extract(token, lambda demo, step: self.inline_slot(demo_cues.marker_html(demo, step)))
            except demo_cues.StepMarkerError as exc:
                raise ContentError(str(exc), line) from None
            self.step_markers += [demo_cues.StepMarker(demo, step, line) for demo, step in found]

    def check_step_markers(self) -> None:
        """Every marker names an embedded demo (and, validating demos, a step of its reference run); the
        lesson's first embed of each such demo then names the run it replays."""
        try:
            demo_cues.check(self.step_markers, [d["name"] for d in self.demos], check_runs=self.validate_demos)
        except demo_cues.StepMarkerError as exc:
            raise ContentError(str(exc), exc.line) from None
        for demo in dict.fromkeys(m.demo for m in self.step_markers):
            key = next((k for k, v in self.slots.items() if v.startswith(f'<div class="demo-embed" data-demo="{demo}"')), None)
            if key is not None:
                self.slots[key] = demo_cues.with_reference_run(self.slots[key], demo)

    @staticmethod
    def _item_text(tokens, start: int) -> str:
        level, texts = 0, []
        for index in range(start, len(tokens)):  # not a slice of the rest: that copy made long lists quadratic
            token = tokens[index]
            if token.type == "list_item_open":
                level += 1
            elif token.type == "list_item_close":
                level -= 1
                if level == 0:
                    break
            elif token.type == "inline":
                text = _inline_text(token)
                if text:
                    texts.append(text if text[-1] in ".!?:;" else f"{text}.")
        return " ".join(texts)

    # --- Directives ---------------------------------------------------------------------------

    def _directive(self, token, lines: list[str], offset: int) -> None:
        start = token.map[0]
        line = start + 1 + offset
        last = token.map[1] - 1
        closing = lines[last].strip() if last < len(lines) else ""
        if last <= start or not (closing and set(closing) == {":"} and len(closing) >= len(token.markup)):
            raise ContentError(
                f"directive '{token.markup}{token.info}' is never closed: add a line '{token.markup}' after it",
                line,
            )
        match = DIRECTIVE_RE.match(token.info.strip())
        if not match:
            raise ContentError(
                f"'{token.markup}{token.info}' is not a directive: write ':::{{name}}' with name one of "
                f"{', '.join(DIRECTIVES)}",
                line,
            )
        kind, rest = match["kind"], match["rest"].strip()
        if kind not in DIRECTIVES:
            raise ContentError(f"unknown directive '{{{kind}}}': expected one of {', '.join(DIRECTIVES)}", line)
        self.budget.spend("directives", line)
        getattr(self, f"_directive_{kind}")(token, rest, line)

    def _name_and_props(self, kind: str, token, rest: str, line: int) -> tuple[str, dict]:
        name, _, inline_json = rest.partition(" ")
        if not name:
            raise ContentError(f"{{{kind}}} needs a name, e.g. ':::{{{kind}}} kv-cache'", line)
        if not NAME_RE.match(name):
            raise ContentError(f"{kind} name '{name}' must be lowercase letters, digits, '-' or '_'", line)
        inline_json, block = inline_json.strip(), token.content.strip()
        if inline_json and block:
            raise ContentError(f"{{{kind}}} {name}: give the JSON props either on the directive line or "
                               "in the block, not both", line)
        if inline_json:
            raw, json_line = inline_json, line
        else:  # the block's first non-blank line
            raw, json_line = block, line + 1 + len(token.content) - len(token.content.lstrip("\n"))
        if not raw:
            return name, {}
        if json_nesting(raw) > MAX_NESTING:
            raise ContentError(f"{{{kind}}} {name}: props nest more than {MAX_NESTING} levels deep", json_line)
        try:
            props = json.loads(raw, parse_int=bounded_int)
        except json.JSONDecodeError as exc:
            if not inline_json:
                _check_closed_after_props(kind, name, raw, line, json_line)
            raise ContentError(
                f"{{{kind}}} {name}: props are not valid JSON ({exc.msg} at column {exc.colno})",
                json_line + exc.lineno - 1,
            ) from None
        except NumberTooLong as exc:
            raise ContentError(f"{{{kind}}} {name}: props: {exc}", json_line) from None
        if not isinstance(props, dict):
            raise ContentError(f"{{{kind}}} {name}: props must be a JSON object {{...}}, "
                               f"not {type(props).__name__}", json_line)
        return name, props

    def _directive_demo(self, token, rest: str, line: int) -> None:
        name, props = self._name_and_props("demo", token, rest, line)
        if self.validate_demos:
            validate_demo(name, props, line)
        self.demos.append({"name": name, "props": props})
        self.slot(token, demo_embed_html(name, props))

    def _directive_calculator(self, token, rest: str, line: int) -> None:
        name, props = self._name_and_props("calculator", token, rest, line)
        if not is_calculator(name):
            known = ", ".join(calculator_names()) or "none found"
            raise ContentError(f"unknown calculator '{name}': there is no static/{CALCULATOR_DIR}/{name}.js "
                               f"that mounts it (available: {known})", line)
        if name not in self.calculators:
            self.calculators.append(name)
        self.slot(token, format_html(
            '<div class="calculator" data-calculator="{}" data-props="{}">'
            "<noscript><p>This interactive calculator needs JavaScript.</p></noscript></div>",
            name, json.dumps(props, ensure_ascii=False),
        ))

    def _directive_lab(self, token, rest: str, line: int) -> None:
        from labs.directive import lab_directive  # the labs app reads courseapp's models: loaded once apps are

        name, props = self._name_and_props("lab", token, rest, line)
        lab, html = lab_directive(name, props, line, dom_id=self._heading_id(f"lab-{name}"), render_inline=_inline_at,
                                  check_params=self.validate_demos, taken={lab["id"] for lab in self.labs})
        self.labs.append(lab)
        self.slot(token, html)

    def _directive_exercise(self, token, rest: str, line: int) -> None:
        from exercises.embed import exercise_embed_html  # the exercises app's templates and urls: loaded once apps are

        name, props = self._name_and_props("exercise", token, rest, line)
        if props:
            raise ContentError(f"{{exercise}} {name} takes no props: its tests and starter code live with it", line)
        try:
            self.slot(token, exercise_embed_html(name))
        except KeyError as error:
            raise ContentError(f"unknown exercise: {error.args[0]}", line) from None

    def _directive_callout(self, token, rest: str, line: int) -> None:
        if rest not in CALLOUT_KINDS:
            raise ContentError(f"callout kind '{rest}' is not supported: write ':::{{callout}} note' or "
                               "':::{callout} warning'", line)
        with self.budget.callout(line):
            children = markdown().parse(token.content, {"annotator": self})
            self.walk(children, token.content.split("\n"), offset=line)
        token.meta["callout"] = rest
        token.meta["children"] = children

    def _directive_quiz(self, token, rest: str, line: int) -> None:
        if self._quiz_line is not None:
            raise ContentError(f"a module has one quiz; another one starts on line {self._quiz_line}", line)
        if rest:
            raise ContentError("write the quiz questions inside the block, not on the ':::{quiz}' line", line)
        self._quiz_line = line
        self.questions = parse_quiz(token.content, first_line=line + 1)
        self.slot(token, QUIZ_MARKER)


def _check_closed_after_props(kind: str, name: str, raw: str, line: int, json_line: int) -> None:
    """A props block that is not JSON because its closing ':::' is missing (the block then runs on to the
    next ':::' in the lesson, swallowing the text and directives between): say so, rather than that the JSON
    is invalid. Signs: a JSON object followed by more text, or a directive line inside the props."""
    try:
        _, end = json.JSONDecoder(parse_int=bounded_int).raw_decode(raw)
    except ValueError:  # JSONDecodeError and NumberTooLong are ValueErrors
        end = None
    lines = raw.split("\n")
    swallowed = next((i for i, text in enumerate(lines) if text.lstrip().startswith(":::")), None)
    if end is None and swallowed is None:
        return
    props_end = json_line + raw[:end].count("\n") if end is not None else json_line + swallowed - 1
    raise ContentError(f"the ':::{{{kind}}} {name}' block opened on line {line} has no closing ':::': add a line "
                       f"':::' after its props (after line {props_end})", line)


MATH_TOKENS = ("math_inline", "math_inline_double", "math_block")


def _spoken_or_source(formula: str) -> str:
    try:
        return latex.spoken(formula)
    except latex.MathError:
        return ""


def _line_of(formula: str, lines: list[str], span) -> int:
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


# --- Calculators -----------------------------------------------------------------------------


def _mounted_names(path: Path) -> set[str]:
    try:
        return set(AUTOMOUNT_RE.findall(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError):
        return set()


def is_calculator(name: str) -> bool:
    """Whether the module page can load calculator `name`: the static file it resolves
    (`js/calculators/<name>.js`, as courseapp.views does) exists and mounts `name`."""
    from django.contrib.staticfiles import finders

    found = finders.find(f"{CALCULATOR_DIR}/{name}.js")
    return bool(found) and name in _mounted_names(Path(found))


def calculator_names() -> list[str]:
    """Every calculator name a `:::{calculator}` directive may use, sorted."""
    from django.contrib.staticfiles import finders

    names: set[str] = set()
    for directory in finders.find(CALCULATOR_DIR, find_all=True) or []:
        for path in Path(directory).glob("*.js"):
            if path.stem in _mounted_names(path):
                names.add(path.stem)
    return sorted(names)


# --- Demos -----------------------------------------------------------------------------------


def validate_demo(name: str, props: dict, line: int | None = None) -> dict:
    """Check demo props against the demo's parameter schema (when the demos app provides one)."""
    try:
        from demos.registry import DemoParamError, validate
    except ImportError:
        return props
    try:
        return validate(name, props)
    except DemoParamError as exc:
        message = getattr(exc, "message", None) or str(exc)
        if getattr(exc, "code", "") in ENVIRONMENT_ERRORS:
            # Refuse rather than store props nobody checked: they would fail only when a student runs them.
            raise ContentError(f"demo '{name}': its parameters cannot be checked on this server ({message}); "
                               "fix the engine install, then save again", line) from None
        raise ContentError(f"demo '{name}': {message}", line) from None


def demo_embed_html(name: str, props: dict) -> str:
    """A `.demo-embed` wrapper holding the demos app's embed (mount point + ES module), or, when that
    is unavailable, a note for readers without JavaScript."""
    inner = mark_safe("<noscript><p>This live demo runs the real model on the server and needs "  # noqa: S308
                      "JavaScript.</p></noscript>")
    try:
        from demos.embed import render_embed
        from demos.registry import DemoParamError
    except ImportError:
        render_embed = None
    links = ""
    if render_embed is not None:
        try:
            inner = mark_safe(str(render_embed(name, props)))  # noqa: S308 (trusted: rendered by the demos app)
            links = demo_links_html(name)
        except DemoParamError as exc:
            logger.warning("demo '%s' embed unavailable: %s", name, exc)
    return format_html('<div class="demo-embed" data-demo="{}" data-props="{}">{}{}</div>',
                       name, json.dumps(props, ensure_ascii=False), inner, links)


def demo_links_html(name: str) -> str:
    """Under a lesson's demo: its own page (more room, a shareable address) and the index of every demo."""
    from django.urls import reverse

    from demos.registry import get_spec

    return format_html('<p class="help demo-embed-links"><a href="{}">Open “{}” on its own page</a> · '
                       '<a href="{}">All live demos</a></p>',
                       reverse("demos:demo", args=[name]), get_spec(name).title, reverse("demos:index"))


# --- Quiz ------------------------------------------------------------------------------------


class _LineLoader(BoundedLoader):
    """The bounded YAML loader (no aliases: every mapping is its own) that remembers the line of every
    mapping as `__line__` (0-based)."""

    def construct_mapping(self, node, deep=False):
        mapping = super().construct_mapping(node, deep=deep)
        mapping["__line__"] = node.start_mark.line
        return mapping


class _QuizLoader(_LineLoader):
    """Also remembers every mapping's column as `__column__`: a generated id is written in at that place."""

    def construct_mapping(self, node, deep=False):
        mapping = super().construct_mapping(node, deep=deep)
        mapping["__column__"] = node.start_mark.column
        return mapping


QUESTION_KEYS = {"id", "question", "choices"}
CHOICE_KEYS = {"id", "text", "correct", "explanation"}


def parse_quiz(text: str, first_line: int) -> list[QuizQuestion]:
    """Parse a quiz block (YAML). `first_line` is the body line of the block's first line."""
    try:
        data = yaml.load(text, Loader=_QuizLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        problem, line = yaml_errors.describe(exc)
        raise ContentError(f"quiz is not valid YAML: {problem}", first_line + line) from None
    if not isinstance(data, list) or not data:
        raise ContentError("a quiz is a YAML list of questions: '- question: ...' with 'choices:'", first_line - 1)
    questions, taken = [], {}  # taken: question id → its number (a dict: a list made long quizzes quadratic)
    for number, item in enumerate(data, start=1):
        if not isinstance(item, dict):
            raise ContentError(f"quiz question {number} must be a mapping with 'question' and 'choices'",
                               first_line - 1)
        q_line, q_column = first_line + item.pop("__line__"), item.pop("__column__")
        unknown = set(item) - QUESTION_KEYS
        if unknown:
            raise ContentError(f"quiz question {number}: unknown key(s) {', '.join(sorted(unknown))}; "
                               f"allowed: id, question, choices", q_line)
        q_id = _quiz_id(item, f"quiz question {number}", q_line, taken)
        text_value = item.get("question")
        if text_value is not None and not isinstance(text_value, str):
            raise ContentError(f"quiz question {number}: 'question' must be text, but YAML read {text_value!r} "
                               "(yes/no/on/off/true/false and numbers are not text in YAML): put it in quotes", q_line)
        if not isinstance(text_value, str) or not text_value.strip():
            raise ContentError(f"quiz question {number} needs a 'question' text", q_line)
        choices_data = item.get("choices")
        if not isinstance(choices_data, list) or len(choices_data) < 2:
            raise ContentError(f"quiz question {number} needs a 'choices' list with at least two choices", q_line)
        choices = [_parse_choice(number, c_number, c, q_line, first_line)
                   for c_number, c in enumerate(choices_data, start=1)]
        if not any(c.correct for c in choices):
            raise ContentError(f"quiz question {number} has no correct choice: mark one with 'correct: true'",
                               q_line)
        seen: dict[str, int] = {}
        for c_number, choice in enumerate(choices, start=1):
            if choice.id and choice.id in seen:
                raise ContentError(f"quiz question {number}, choice {c_number}: id '{choice.id}' is already used by "
                                   f"choice {seen[choice.id]}", choice.line)
            seen.setdefault(choice.id, c_number)
        quiz_ids.assign_ids(choices, "c")
        if q_id:
            taken[q_id] = number
        questions.append(QuizQuestion(text_value.strip(), _inline_at(text_value.strip(), q_line), choices, q_line,
                                      id=q_id, column=q_column))
    quiz_ids.assign_ids(questions, "q")
    return questions


def _quiz_id(item: dict, where: str, line: int, taken: dict[str, int]) -> str:
    """The id an author wrote for a question or choice ("" when none), checked against `taken` (id → question)."""
    value = item.get("id")
    if value is None:
        return ""
    if not isinstance(value, str) or not quiz_ids.ID_RE.match(value):
        raise ContentError(f"{where}: id {value!r} is not valid: {quiz_ids.ID_HINT}", line)
    if value in taken:
        raise ContentError(f"{where}: id '{value}' is already used by question {taken[value]}", line)
    return value


def _parse_choice(number: int, c_number: int, data, q_line: int, first_line: int) -> QuizChoice:
    where = f"quiz question {number}, choice {c_number}"
    if not isinstance(data, dict):
        raise ContentError(f"{where} must be a mapping with 'text', 'explanation' and optionally "
                           "'correct: true'", q_line)
    c_line, c_column = first_line + data.pop("__line__"), data.pop("__column__")
    unknown = set(data) - CHOICE_KEYS
    if unknown:
        raise ContentError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; allowed: "
                           "id, text, correct, explanation", c_line)
    c_id = _quiz_id(data, where, c_line, {})
    text_value, explanation = data.get("text"), data.get("explanation")
    if text_value is not None and not isinstance(text_value, str):
        raise ContentError(f"{where}: 'text' must be text, but YAML read {text_value!r} (yes/no/on/off/true/false and numbers are not text in YAML): put it in quotes", c_line)
    if not isinstance(text_value, str) or not text_value.strip():
        raise ContentError(f"{where} needs a 'text'", c_line)
    if explanation is not None and not isinstance(explanation, str):
        raise ContentError(f"{where}: 'explanation' must be text, but YAML read {explanation!r} (yes/no/on/off/true/false and numbers are not text in YAML): put it in quotes",
                           c_line)
    if not isinstance(explanation, str) or not explanation.strip():
        raise ContentError(f"{where} needs an 'explanation' (every choice explains why it is right or wrong)",
                           c_line)
    correct = data.get("correct", False)
    if not isinstance(correct, bool):
        raise ContentError(f"{where}: 'correct' must be true or false", c_line)
    return QuizChoice(text_value.strip(), _inline_at(text_value.strip(), c_line), correct,
                      explanation.strip(), _inline_at(explanation.strip(), c_line), id=c_id, line=c_line,
                      column=c_column)


def _inline_at(text: str, line: int) -> str:
    """`render_inline` for a quiz text on `line` (its LaTeX errors point there)."""
    try:
        return render_inline(text)
    except ContentError as exc:
        raise ContentError(exc.message, line) from None
