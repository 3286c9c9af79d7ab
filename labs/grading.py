"""Grading a lab's answers against the student's own table (labs/table.py), with feedback in their numbers.

- ratio: "how many times …": right when the number lies within what their runs allow, from the lowest ratio
  (of's slowest run over over's fastest) to the highest; the number as typed stands for its rounding ("4.1" is
  4.05–4.15), so a student who rounds the median is not marked wrong for it.
- argmin / argmax: which configuration has the lowest / highest median; a configuration whose spread reaches the
  best one's counts too (their runs cannot tell the two apart).
- text: kept for the instructor, never graded.

The score is correct ÷ graded questions (text ones left out).
"""
from __future__ import annotations

import math
import re

GRADED_KINDS = {"ratio", "argmin", "argmax"}
MAX_ANSWER_CHARS = 2000
NUMBER_RE = re.compile(r"^\s*([+-]?(?:\d+(?:[.,](\d*))?|[.,](\d+)))\s*[×xX]?\s*$")


class AnswerError(ValueError):
    """An answer the lab cannot store (unknown question, wrong type, too long): a 400."""


def clean_answers(lab: dict, answers) -> dict:
    """The answers worth storing: known question ids, texts or numbers, empty ones dropped."""
    if not isinstance(answers, dict):
        raise AnswerError("'answers' must be an object: question id → answer")
    questions = {q["id"]: q for q in lab["questions"]}
    cleaned = {}
    for q_id, value in answers.items():
        if q_id not in questions:
            raise AnswerError(f"this lab has no question {str(q_id)[:40]!r}")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            value = str(value)
        if not isinstance(value, str):
            raise AnswerError(f"the answer to '{q_id}' must be text or a number")
        if len(value) > MAX_ANSWER_CHARS:
            raise AnswerError(f"the answer to '{q_id}' is longer than {MAX_ANSWER_CHARS} characters")
        if value.strip():
            cleaned[q_id] = value.strip()
    return cleaned


def parse_number(text: str) -> tuple[float, float] | None:
    """(value, half its last digit's step) of a typed number ("4.1", "4,1", "4.1×"), or None."""
    match = NUMBER_RE.match(text)
    if not match:
        return None
    decimals = len(match[2] or match[3] or "")
    return float(match[1].replace(",", ".")), 0.5 * 10 ** -decimals


def fmt(value: float) -> str:
    """Three significant figures or so, as a student reads a table: 190, 46.1, 4.12, 0.534."""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def grade(lab: dict, table: dict, answers: dict) -> dict:
    """Question id → {correct (True, False, or None: not graded), message, …}, for every question."""
    rows = {row["id"]: row for row in table["rows"]}
    feedback = {}
    for question in lab["questions"]:
        answer = answers.get(question["id"], "")
        kind = question["kind"]
        if kind == "text":
            feedback[question["id"]] = {"correct": None, "message": "Saved: your instructor reads this answer; it "
                                        "is not scored." if answer else "Not answered yet."}
        elif not answer:
            feedback[question["id"]] = {"correct": False, "message": "Not answered yet."}
        elif kind == "ratio":
            feedback[question["id"]] = _ratio(question, rows, table["metrics"][question["metric"]], answer)
        else:
            feedback[question["id"]] = _extreme(question, table["rows"], table["metrics"][question["metric"]], answer)
    return feedback


def score(lab: dict, feedback: dict) -> float | None:
    graded = [q["id"] for q in lab["questions"] if q["kind"] in GRADED_KINDS]
    return sum(feedback.get(q, {}).get("correct") is True for q in graded) / len(graded) if graded else None


def _ratio(question: dict, rows: dict, metric: dict, answer: str) -> dict:
    of, over = rows[question["of"]], rows[question["over"]]
    name, unit = question["metric"], metric["unit"]
    waiting = [r["label"] for r in (of, over) if name not in r["stats"]]
    if waiting:
        return {"correct": None, "message": f"Run {' and '.join(waiting)} first: this is graded against your own runs."}
    a, b = of["stats"][name], over["stats"][name]
    ratio, low, high = a["median"] / b["median"], a["min"] / b["max"], a["max"] / b["min"]
    said = (f"Your {of['label']} median, {fmt(a['median'])} {unit}, over {over['label']}'s {fmt(b['median'])} {unit} "
            f"is {fmt(ratio)}×; your runs allow {fmt(low)}–{fmt(high)}× (each one's slowest and fastest run).")
    parsed = parse_number(answer)
    if parsed is None:
        return {"correct": False, "message": f"“{answer[:40]}” is not a number. {said}", "expected": ratio,
                "low": low, "high": high}
    value, half_step = parsed
    correct = value + half_step >= low and value - half_step <= high
    verdict = (f"Right: {answer}× is within that." if correct else
               f"Not quite: {answer}× is outside that range. Divide the two medians in the table.")
    return {"correct": correct, "message": f"{said} {verdict}", "expected": ratio, "low": low, "high": high}


def _extreme(question: dict, rows: list[dict], metric: dict, answer: str) -> dict:
    name, unit, lowest = question["metric"], metric["unit"], question["kind"] == "argmin"
    waiting = [r["label"] for r in rows if name not in r["stats"]]
    if waiting:
        return {"correct": None, "message": f"Run every configuration first (still to run: {', '.join(waiting)}): "
                                            "this is graded against your own runs."}
    ranked = sorted(rows, key=lambda r: r["stats"][name]["median"], reverse=not lowest)
    best = ranked[0]["stats"][name]
    # A configuration whose runs reach the best one's range: the student's runs cannot tell the two apart.
    accepted = [r["id"] for r in ranked if (r["stats"][name]["min"] <= best["max"] if lowest
                                           else r["stats"][name]["max"] >= best["min"])]
    chosen = next((r for r in rows if r["id"] == answer), None)
    if chosen is None:
        return {"correct": False, "message": "Choose one of the configurations.", "accepted": accepted}
    word = "lowest" if lowest else "highest"
    others = ", ".join(f"{r['label']} {fmt(r['stats'][name]['median'])}" for r in ranked[1:])
    said = (f"{ranked[0]['label']} has the {word} {metric['label']} in your runs: {fmt(best['median'])} {unit} "
            f"(median; {others}).")
    if len(accepted) > 1:
        labels = {r["id"]: r["label"] for r in rows}
        said += f" Your runs of {', '.join(labels[a] for a in accepted[1:])} overlap it, so they count too."
    correct = answer in accepted
    verdict = f"Right: you chose {chosen['label']}." if correct else (
        f"Not quite: you chose {chosen['label']}, {fmt(chosen['stats'][name]['median'])} {unit}.")
    return {"correct": correct, "message": f"{said} {verdict}", "accepted": accepted}
