"""A `:::{lab} ID` directive's props, checked and turned into the lab's stored definition (a JSON-able dict).

Called by the course renderer with the directive's line, so every refusal is a `ContentError` at that line. The
configurations' params go through the demo's own validation (`demos.registry.validate`: types, limits, the demo's
check), and what is stored is the cleaned params, exactly what a `start` of that configuration stores on its `Run`,
so a student's runs are matched to rows by equality. Question texts are Markdown, rendered by the function the
renderer passes in (this module must not import the renderer: the renderer imports it).
"""
from __future__ import annotations

import re
from typing import Callable

from courseapp.content_error import ContentError
from demos.registry import DemoParamError, get_spec, validate

from .metrics import DEFAULT_SIDE, SIDES, metrics_for

ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
ID_HINT = "lowercase letters, digits, '-' or '_', at most 40 characters"
LAB_KEYS = {"demo", "title", "question", "repeats", "metric", "params", "configs", "questions"}
CONFIG_KEYS = {"id", "label", "params", "side"}
QUESTION_KEYS = {"id", "kind", "text", "of", "over", "metric"}
# ratio: a number, graded against the spread of the student's runs; argmin/argmax: a configuration, graded against
# their medians; text: a free answer, kept for the instructor and not graded.
QUESTION_KINDS = {"ratio": {"of", "over"}, "argmin": set(), "argmax": set(), "text": set()}
MIN_CONFIGS, MAX_CONFIGS = 2, 6
MIN_REPEATS, MAX_REPEATS = 1, 5
MAX_QUESTIONS = 10
MAX_TITLE, MAX_LABEL, MAX_TEXT = 200, 80, 2000
# Demo errors caused by the server (as the renderer's own ENVIRONMENT_ERRORS): said as such, never as a bad prop.
ENVIRONMENT_ERRORS = {"engine_unavailable"}


def parse_lab(name: str, props: dict, line: int, *, render_inline: Callable[[str, int], str],
              check_params: bool = True, taken: set[str] = frozenset()) -> dict:
    """The stored definition of lab `name`, or a `ContentError` at `line`. `taken`: lab ids the module already uses."""
    where = f"lab '{name}'"

    def fail(message: str):
        raise ContentError(f"{where}: {message}", line)

    if not ID_RE.match(name):
        fail(f"its id must be {ID_HINT}")
    if name in taken:
        fail("another lab of this module has the same id")
    unknown = set(props) - LAB_KEYS
    if unknown:
        fail(f"unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(LAB_KEYS))}")
    demo = props.get("demo")
    try:
        spec = get_spec(demo)
    except DemoParamError as exc:
        fail(exc.message)
    metrics = metrics_for(spec.name)
    if not metrics:
        fail(f"demo '{spec.name}' has no lab metrics (labs/metrics.py lists them per demo)")
    title = _text(props, "title", MAX_TITLE, fail)
    question = _text(props, "question", MAX_TEXT, fail)
    repeats = props.get("repeats", 3)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not MIN_REPEATS <= repeats <= MAX_REPEATS:
        fail(f"'repeats' must be a whole number from {MIN_REPEATS} to {MAX_REPEATS}")
    metric = _metric(props.get("metric"), metrics, "'metric'", fail)
    base = props.get("params", {})
    if not isinstance(base, dict):
        fail("'params' (shared by every configuration) must be a JSON object")
    configs = _configs(props.get("configs"), spec, base, check_params, fail)
    questions = _questions(props.get("questions", []), configs, metrics, metric, line, render_inline, fail)
    return {"id": name, "demo": spec.name, "title": title, "question": question,
            "question_html": render_inline(question, line), "repeats": repeats, "metric": metric,
            "configs": configs, "questions": questions}


def _text(props: dict, key: str, limit: int, fail) -> str:
    value = props.get(key)
    if not isinstance(value, str) or not value.strip():
        fail(f"'{key}' must be a non-empty text")
    if len(value) > limit:
        fail(f"'{key}' is longer than {limit} characters")
    return value.strip()


def _metric(value, metrics: dict, what: str, fail) -> str:
    if value not in metrics:
        fail(f"{what} must be one of {', '.join(sorted(metrics))}, not {str(value)[:60]!r}")
    return value


def _configs(items, spec, base: dict, check_params: bool, fail) -> list[dict]:
    if not isinstance(items, list) or not MIN_CONFIGS <= len(items) <= MAX_CONFIGS:
        fail(f"'configs' must be a list of {MIN_CONFIGS} to {MAX_CONFIGS} configurations")
    configs: list[dict] = []
    seen: dict[tuple, str] = {}  # (params, side) → the configuration that measures them
    sides = SIDES.get(spec.name, {})
    for number, item in enumerate(items, start=1):
        config_id = _item_id(item, f"configuration {number}", "'id', 'label' and 'params'", CONFIG_KEYS,
                             {c["id"] for c in configs}, fail)
        label = _text(item, "label", MAX_LABEL, lambda m: fail(f"configuration '{config_id}': {m}"))
        side = item.get("side", DEFAULT_SIDE)
        if side != DEFAULT_SIDE and side not in sides:
            known = f"one of {', '.join(sorted(sides))}" if sides else "left out: this demo measures one side"
            fail(f"configuration '{config_id}': 'side' must be {known}")
        params = item.get("params", {})
        if not isinstance(params, dict):
            fail(f"configuration '{config_id}': 'params' must be a JSON object")
        cleaned = _cleaned(spec, {**base, **params}, check_params, lambda m: fail(f"configuration '{config_id}': {m}"))
        key = (repr(sorted(cleaned.items())), side)
        if key in seen:
            fail(f"configurations '{seen[key]}' and '{config_id}' measure the same thing (same params and side)")
        seen[key] = config_id
        configs.append({"id": config_id, "label": label, "params": cleaned, "side": side})
    return configs


def _item_id(item, where: str, keys_hint: str, allowed: set, taken: set, fail) -> str:
    """The id of one configuration or question, after the checks both share: an object, only known keys, an id of
    the right form and not taken. `where` names it for the messages ("question 2")."""
    if not isinstance(item, dict):
        fail(f"{where} must be a JSON object with {keys_hint}")
    unknown = set(item) - allowed
    if unknown:
        fail(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(allowed))}")
    item_id = item.get("id")
    if not isinstance(item_id, str) or not ID_RE.match(item_id):
        fail(f"{where}: 'id' must be {ID_HINT}")
    if item_id in taken:
        fail(f"{where.split()[0]} id '{item_id}' is used twice")
    return item_id


def _cleaned(spec, params: dict, check_params: bool, fail) -> dict:
    """What a `start` with `params` stores on its Run: the demo's cleaned params (defaults filled in)."""
    if not check_params:
        return spec.with_defaults(params)
    try:
        return validate(spec.name, params)
    except DemoParamError as exc:
        if exc.code in ENVIRONMENT_ERRORS:
            fail(f"its parameters cannot be checked on this server ({exc.message}); fix the engine install, "
                 "then save again")
        fail(exc.message)


def _questions(items, configs: list[dict], metrics: dict, lab_metric: str, line: int,
               render_inline: Callable[[str, int], str], fail) -> list[dict]:
    if not isinstance(items, list) or len(items) > MAX_QUESTIONS:
        fail(f"'questions' must be a list of at most {MAX_QUESTIONS} questions")
    ids = {c["id"] for c in configs}
    questions: list[dict] = []
    for number, item in enumerate(items, start=1):
        q_id = _item_id(item, f"question {number}", "'id', 'kind' and 'text'", QUESTION_KEYS,
                        {q["id"] for q in questions}, fail)
        kind = item.get("kind")
        if kind not in QUESTION_KINDS:
            fail(f"question '{q_id}': 'kind' must be one of {', '.join(sorted(QUESTION_KINDS))}")
        text = _text(item, "text", MAX_TEXT, lambda m: fail(f"question '{q_id}': {m}"))
        question = {"id": q_id, "kind": kind, "text": text, "text_html": render_inline(text, line)}
        extra = set(item) - {"id", "kind", "text"} - QUESTION_KINDS[kind] - ({"metric"} if kind != "text" else set())
        if extra:
            fail(f"question '{q_id}': a {kind} question takes no {', '.join(sorted(extra))}")
        if kind != "text":
            question["metric"] = _metric(item.get("metric", lab_metric), metrics, f"question '{q_id}': 'metric'", fail)
        if kind == "ratio":
            for key in ("of", "over"):
                if item.get(key) not in ids:
                    fail(f"question '{q_id}': '{key}' must name a configuration ({', '.join(sorted(ids))})")
                question[key] = item[key]
            if question["of"] == question["over"]:
                fail(f"question '{q_id}': 'of' and 'over' name the same configuration")
        questions.append(question)
    return questions
