"""What a `:::{demo}` or `:::{calculator}` directive may name, and the HTML it becomes: a demo's props are checked
against its spec in the demos app (`demos.registry`), a calculator is a static ES module that mounts itself.
"""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from django.utils.html import format_html
from django.utils.safestring import mark_safe

from .content_error import ContentError
from .input_limits import bounded_int

logger = logging.getLogger(__name__)

# Demo validation errors caused by the environment (not by the directive): never block authoring.
ENVIRONMENT_ERRORS = {"engine_unavailable"}
# A calculator NAME is the static file js/calculators/NAME.js (what the module page loads) that mounts
# itself with autoMount("NAME", ...); helper modules there (formulas.js, ui.js) are not calculators.
CALCULATOR_DIR = "js/calculators"
AUTOMOUNT_RE = re.compile(r"""^\s*autoMount\(\s*["'](?P<name>[^"']+)["']""", re.M)


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


def check_closed_after_props(kind: str, name: str, raw: str, line: int, json_line: int) -> None:
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
