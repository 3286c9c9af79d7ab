"""LaTeX in lessons (`$…$` inline, `$$…$$` display) → MathML for the page and words for the narration.

latex2mathml parses the LaTeX into an element tree; we never use its string output, which un-escapes
everything (a `\\text{<script>}` would come out as markup). Instead the tree is rebuilt here through an
allowlist of MathML elements and attributes and serialized by ElementTree, which escapes every text:
the result is trusted HTML that needs no sanitizer. The same tree is read aloud by `spoken`, so the
narration says "t sub step equals …" instead of spelling out backslashes and braces.

Invariants: a formula either converts completely or raises `MathError` with a message for the author
(an unknown command such as `\\fracc`, an unbalanced brace or `\\left` without `\\right`, macro
definitions, a formula over `MAX_LATEX` characters or nesting over `MAX_DEPTH` levels); nothing here ever
raises anything else.
"""
from __future__ import annotations

import html
import re
import unicodedata
from xml.etree.ElementTree import Element, SubElement, tostring

MAX_LATEX = 2_000  # characters in one formula: lessons write short ones, and parsing cost grows with length
MAX_DEPTH = 40  # nested braces: the converter and `_say` recurse once per level
MATHML_NS = "http://www.w3.org/1998/Math/MathML"
# Macro definitions expand without bound (`\def\a{\a\a}`); lessons have no need of them.
REFUSED_COMMANDS = re.compile(r"\\(?:def|gdef|edef|newcommand|renewcommand|providecommand|DeclareMathOperator)\b")
ELEMENTS = {
    "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msub", "msup", "msubsup", "mfrac", "msqrt",
    "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd", "mlabeledtr", "mstyle", "mpadded",
    "mphantom", "menclose", "mmultiscripts", "mprescripts", "none",
}
ATTRIBUTES = {
    "display", "mathvariant", "stretchy", "fence", "separator", "accent", "accentunder", "linethickness",
    "columnalign", "columnlines", "columnspacing", "rowspacing", "rowlines", "rowalign", "displaystyle",
    "scriptlevel", "lspace", "rspace", "width", "height", "depth", "notation", "minsize", "maxsize",
    "movablelimits", "form", "symmetric", "largeop", "frame", "framespacing", "align", "columnspan", "rowspan",
    "voffset", "mathsize",
}


class MathError(ValueError):
    """LaTeX that cannot be shown: the message says what to fix."""


def _tree(latex: str, display: bool) -> Element:
    from latex2mathml.converter import Converter

    latex = latex.strip()
    if not latex:
        raise MathError("the formula is empty")
    if len(latex) > MAX_LATEX:
        raise MathError(f"the formula is {len(latex):,} characters long; the limit is {MAX_LATEX:,}")
    refused = REFUSED_COMMANDS.search(latex)
    if refused:
        raise MathError(f"{refused[0]} is not supported in lessons: write the formula out")
    if latex.count("{") - latex.count("\\{") != latex.count("}") - latex.count("\\}"):
        raise MathError("its braces { } are not balanced")
    depth = deepest = 0
    for char in re.sub(r"\\[{}]", "", latex):
        depth += {"{": 1, "}": -1}.get(char, 0)
        deepest = max(deepest, depth)
    if deepest > MAX_DEPTH:
        raise MathError(f"its braces nest {deepest} levels deep; the limit is {MAX_DEPTH}")
    try:
        tree = Converter(display="block" if display else "inline").convert_to_element(latex)
    except Exception as exc:  # latex2mathml raises its own exceptions, and IndexError/StopIteration on some input
        name = re.sub(r"(?<!^)(?=[A-Z])", " ", type(exc).__name__).lower().removesuffix(" error")
        detail = f": {exc}" if str(exc) else ""
        raise MathError(f"LaTeX it cannot read ({name}{detail})") from None
    for node in tree.iter():
        text = html.unescape(node.text or "")
        if node.tag in ("mi", "mo") and text.startswith("\\") and len(text) > 1:
            raise MathError(f"unknown LaTeX command {text}")
    return tree


def _clean(node: Element, parent: Element | None) -> Element:
    """A copy of `node` with allowed elements and attributes only, its texts un-escaped (ElementTree escapes
    them again when serializing)."""
    tag = node.tag if node.tag in ELEMENTS else "mrow"
    attributes = {k: v for k, v in node.attrib.items() if k in ATTRIBUTES}
    copy = Element(tag, attributes) if parent is None else SubElement(parent, tag, attributes)
    copy.text = html.unescape(node.text) if node.text else None
    for child in node:
        _clean(child, copy).tail = html.unescape(child.tail) if child.tail else None
    return copy


def to_mathml(latex: str, *, display: bool = False, alttext: str = "") -> str:
    """Escaped, allowlisted MathML for `latex` (raises MathError); `alttext` (the formula in words) is what
    text-only readers of the HTML, such as the site search, take in place of the markup."""
    clean = _clean(_tree(latex, display), None)
    clean.set("xmlns", MATHML_NS)
    clean.set("display", "block" if display else "inline")
    if alttext:
        clean.set("alttext", alttext)
    return tostring(clean, encoding="unicode", short_empty_elements=False)


# --- Speech -------------------------------------------------------------------------------------

_OPERATORS = {
    "=": " equals ", "≠": " is not equal to ", "<": " is less than ", ">": " is greater than ",
    "≤": " is at most ", "≥": " is at least ", "≈": " is about ", "∼": " is about ", "+": " plus ",
    "−": " minus ", "-": " minus ", "×": " times ", "⋅": " times ", "·": " times ", "∗": " times ",
    "/": " over ", "÷": " divided by ", "±": " plus or minus ", "→": " to ", "∝": " is proportional to ",
    "∑": " the sum of ", "∏": " the product of ", "∞": " infinity ", "…": " and so on ", "⋯": " and so on ",
    ",": ", ", "(": " ", ")": " ", "[": " ", "]": " ", "{": " ", "}": " ", "|": " ", "′": " prime ",
    "∈": " in ", "log": " log ", "exp": " exp ", "max": " max ", "min": " min ",
}
_GREEK = {
    "α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "epsilon", "ϵ": "epsilon", "η": "eta",
    "θ": "theta", "λ": "lambda", "μ": "mu", "π": "pi", "ρ": "rho", "σ": "sigma", "τ": "tau", "φ": "phi",
    "ϕ": "phi", "ω": "omega", "Σ": "sigma", "Δ": "delta",
}


def _say(node: Element) -> str:
    tag, kids = node.tag, list(node)
    text = unicodedata.normalize("NFKC", html.unescape(node.text or "")).strip()  # 𝖳 → T, 𝐱 → x
    if tag in ("mi", "mn", "mtext", "ms"):
        return " ".join(_GREEK.get(ch, ch) for ch in text.split()) if tag == "mtext" else _GREEK.get(text, text)
    if tag == "mo":
        return _OPERATORS.get(text, f" {_GREEK.get(text, text)} ")
    if tag == "mfrac" and len(kids) == 2:
        return f" {_say(kids[0])} over {_say(kids[1])} "
    if tag == "msqrt":
        return " the square root of " + " ".join(_say(k) for k in kids) + " "
    if tag == "mroot" and len(kids) == 2:
        return f" the root {_say(kids[1])} of {_say(kids[0])} "
    if tag == "msup" and len(kids) == 2:
        power = _say(kids[1]).strip()
        if power == "2":
            return f"{_say(kids[0])} squared "
        if power == "3":
            return f"{_say(kids[0])} cubed "
        if power in ("T", "⊤"):
            return f"{_say(kids[0])} transpose "
        if power == "′":
            return f"{_say(kids[0])} prime "
        return f"{_say(kids[0])} to the power {power} "
    if tag == "msub" and len(kids) == 2:
        return f"{_say(kids[0])} sub {_say(kids[1])} "
    if tag == "msubsup" and len(kids) == 3:
        return f"{_say(kids[0])} sub {_say(kids[1])} to the power {_say(kids[2])} "
    if tag in ("munder", "munderover", "mover") and kids:
        return _say(kids[0]) + " "
    return " ".join(_say(k) for k in kids)


def spoken(latex: str) -> str:
    """The formula as words for the narration ("t sub step equals n over b"); raises MathError."""
    words = _say(_tree(latex, display=False))
    words = re.sub(r"\s+([,.;:])", r"\1", words)
    return re.sub(r"\s+", " ", words).strip()
