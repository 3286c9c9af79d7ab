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
import json
import re
import secrets
from dataclasses import dataclass, field

from django.utils.html import format_html
from django.utils.text import slugify

from serverprofile import figures as server_figures

from . import demo_cues, latex, render_budget
from .content_error import ContentError
from .demo_embeds import (CALCULATOR_DIR, calculator_names, check_closed_after_props, demo_embed_html, is_calculator,
                          validate_demo)
from .input_limits import MAX_NESTING, NumberTooLong, bounded_int, json_nesting
from .markup import (CALLOUT_KINDS, MATH_TOKENS, check_raw_text_closed, inline_text, line_of, markdown, sanitize,
                     spoken_or_source)
from .models import QUIZ_MARKER
from .quiz_parse import LineLoader, parse_quiz
from .rendered import WORDS_PER_MINUTE, Cue, QuizChoice, QuizQuestion, RenderedModule, cue_hash

__all__ = ["CALCULATOR_DIR", "WORDS_PER_MINUTE", "ContentError", "Cue", "LineLoader", "QuizChoice", "QuizQuestion",
           "RenderedModule", "calculator_names", "cue_hash", "markdown", "parse_quiz", "render_inline",
           "render_markdown", "sanitize", "spoken_or_source", "validate_demo"]

DIRECTIVES = ("demo", "calculator", "quiz", "callout", "lab", "exercise")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
DIRECTIVE_RE = re.compile(r"^\{(?P<kind>[^}\s]*)\}\s*(?P<rest>.*)$", re.S)
UNNARRATED_SECTIONS = {"sources", "references", "further reading", "bibliography"}
# `[text](other-module.md#part)` works on GitHub and, rewritten to the module URL, on the site.
MODULE_LINK_RE = re.compile(r"^(?:\./)?(?P<slug>[a-z0-9]+(?:-[a-z0-9]+)*)\.md(?P<anchor>#[^\s]*)?$")
RESERVED_IDS = {"main", "content", "lesson", "outline", "quiz", "player", "narration", "pager", "top"}
# The placeholders of `_Annotator.slot` and `inline_slot`, whatever the render's nonce (one compiled pattern).
SLOT_RE = re.compile(r"ilab[0-9a-f]+slot[0-9]+x|<div>slot-[0-9a-f]+-[0-9]+</div>")


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
    check_raw_text_closed(raw, lines)
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


# --- Token walking ---------------------------------------------------------------------------

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
                    line = line_of(formula.content, lines, token.map) + offset
                    raise ContentError(f"math ${formula.content.strip()[:60]}$: {exc}", line) from None

    def walk(self, tokens, lines: list[str], offset: int) -> None:
        """Annotate `tokens` parsed from `lines`; `offset` maps their line numbers to the body's."""
        self._convert_math(tokens, lines, offset)
        self._take_step_markers(tokens, offset)
        item_depth = 0
        for idx, token in enumerate(tokens):
            if token.type == "inline":
                self.word_count += len(re.findall(r"\w+", inline_text(token)))
                _rewrite_module_links(token)
            elif token.type == "heading_open":
                text = inline_text(tokens[idx + 1])
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
                self._cue(token, inline_text(tokens[idx + 1]), "paragraph")
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
                text = inline_text(token)
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
                check_closed_after_props(kind, name, raw, line, json_line)
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
        self.questions = parse_quiz(token.content, first_line=line + 1, inline=_inline_at)
        self.slot(token, QUIZ_MARKER)


def _inline_at(text: str, line: int) -> str:
    """`render_inline` for a quiz text on `line` (its LaTeX errors point there)."""
    try:
        return render_inline(text)
    except ContentError as exc:
        raise ContentError(exc.message, line) from None
