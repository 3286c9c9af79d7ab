"""The one entry the course renderer calls for a `:::{lab} ID` directive: the lab's stored definition and its
trusted HTML. The renderer passes its own inline-Markdown function in, so nothing here imports the renderer."""
from __future__ import annotations

from typing import Callable

from .definition import parse_lab
from .embed import lab_embed_html


def lab_directive(name: str, props: dict, line: int, *, dom_id: str, render_inline: Callable[[str, int], str],
                  check_params: bool, taken: set[str]) -> tuple[dict, str]:
    lab = parse_lab(name, props, line, render_inline=render_inline, check_params=check_params, taken=taken)
    return lab, lab_embed_html(lab, dom_id)
