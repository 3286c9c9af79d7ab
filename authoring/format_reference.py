"""The format reference's lists of demos and calculators, generated from what the server runs, never
written by hand: a demo's props from its spec (`demos.catalog`, `DemoSpec.describe()`: the same limits
`validate` applies to a `:::{demo}`), a calculator's from its script (`static/js/calculators/NAME.js`: the
`props.X` it reads, and its header comment). A demo or calculator added, or a default changed, shows here
at once.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from django.contrib.staticfiles import finders

from courseapp.rendering import CALCULATOR_DIR, calculator_names

PROP_READ_RE = re.compile(r"""\bprops(?:\.([A-Za-z_]\w*)|\[\s*["']([^"']+)["']\s*\])""")
HEADER_RE = re.compile(r"\A(?://[^\n]*\n)+")
# Props a calculator reads that are plumbing (where to load the charting library from), not for lessons.
PLUMBING_PROPS = {"plotlyUrl"}


@dataclass(frozen=True)
class Prop:
    name: str
    kind: str
    detail: str  # default, limits, choices: one line
    help: str = ""


@dataclass(frozen=True)
class Entry:
    name: str
    title: str
    description: str
    props: tuple[Prop, ...]
    example: str  # a directive using it, with its default props


def _detail(spec: dict) -> str:
    parts = ["required" if spec.get("required") else f"default {json.dumps(spec.get('default'))}"]
    if "min" in spec or "max" in spec:
        parts.append(f"{spec.get('min', '…')} to {spec.get('max', '…')}")
    if spec.get("choices"):
        parts.append("one of " + ", ".join(json.dumps(c) for c in spec["choices"]))
    if spec.get("max_tokens"):
        parts.append(f"at most {spec['max_tokens']} tokens")
    return "; ".join(parts)


def demos() -> list[Entry]:
    """Every demo a `:::{demo}` may name, with its props; [] when the demos app is not installed."""
    try:
        from demos.catalog import DEMOS
    except ImportError:
        return []
    entries = []
    for name in sorted(DEMOS):
        described = DEMOS[name].describe()
        props = tuple(Prop(key, spec["kind"], _detail(spec), spec.get("help") or spec.get("label") or "")
                      for key, spec in described["params"].items())
        example_props = {key: spec["default"] for key, spec in described["params"].items()
                         if not spec["required"] and key in ("prompt", "max_new_tokens")}
        example = f":::{{demo}} {name}\n{json.dumps(example_props, ensure_ascii=False)}\n:::"
        entries.append(Entry(name, described["title"], described.get("description") or "", props, example))
    return entries


def _header(text: str) -> str:
    """A calculator script's opening comment, as prose (its "Props:" line left out: the props are listed)."""
    match = HEADER_RE.match(text)
    lines = [line.removeprefix("//").strip() for line in (match[0] if match else "").splitlines()]
    return " ".join(line for line in lines if not line.startswith("Props:"))


def calculators() -> list[Entry]:
    """Every calculator a `:::{calculator}` may name, with the props its script reads."""
    entries = []
    for name in calculator_names():
        found = finders.find(f"{CALCULATOR_DIR}/{name}.js")
        text = Path(found).read_text(encoding="utf-8") if found else ""
        names = dict.fromkeys(a or b for a, b in PROP_READ_RE.findall(text) if (a or b) not in PLUMBING_PROPS)
        props = tuple(Prop(prop, "", "optional") for prop in names)
        entries.append(Entry(name, name.replace("-", " ").capitalize(), _header(text), props,
                             f":::{{calculator}} {name}\n:::"))
    return entries


@dataclass(frozen=True)
class ReferenceRun:
    demo: str
    steps: int
    params: str  # the settings it ran with, as JSON


def reference_runs() -> list[ReferenceRun]:
    """Every demo with a stored reference run a narration step marker may drive (content/runs/<demo>.json)."""
    from courseapp import demo_cues

    runs = []
    for path in sorted(demo_cues.runs_dir().glob("*.json")):
        run = demo_cues.reference_run(path.stem)
        if run is not None:
            runs.append(ReferenceRun(path.stem, demo_cues.run_steps(run),
                                     json.dumps(run.get("params") or {}, ensure_ascii=False)))
    return runs


def exercises() -> list[dict]:
    """Every exercise a `:::{exercise}` may name (`exercises.catalog`, listed there, not discovered): its id, title,
    summary and the functions a student writes; [] when the exercises app is not installed."""
    try:
        from exercises.catalog import EXERCISES
    except ImportError:
        return []
    return [{"id": e.id, "title": e.title, "summary": e.summary, "functions": e.functions,
             "tests": len(e.visible), "hidden": len(e.hidden)} for _, e in sorted(EXERCISES.items())]
