"""A `:::{quiz}` block: YAML questions and choices, each with its line, checked and given stable ids
(`quiz_ids`). Texts are rendered by the caller's `inline(text, line)` (the renderer's inline Markdown).
"""
from __future__ import annotations

from collections.abc import Callable

import yaml

from . import quiz_ids, yaml_errors
from .content_error import ContentError
from .rendered import QuizChoice, QuizQuestion
from .safe_yaml import BoundedLoader

Inline = Callable[[str, int], str]


class LineLoader(BoundedLoader):
    """The bounded YAML loader (no aliases: every mapping is its own) that remembers the line of every
    mapping as `__line__` (0-based)."""

    def construct_mapping(self, node, deep=False):
        mapping = super().construct_mapping(node, deep=deep)
        mapping["__line__"] = node.start_mark.line
        return mapping


class _QuizLoader(LineLoader):
    """Also remembers every mapping's column as `__column__`: a generated id is written in at that place."""

    def construct_mapping(self, node, deep=False):
        mapping = super().construct_mapping(node, deep=deep)
        mapping["__column__"] = node.start_mark.column
        return mapping


QUESTION_KEYS = {"id", "question", "choices"}
CHOICE_KEYS = {"id", "text", "correct", "explanation"}


def parse_quiz(text: str, first_line: int, inline: Inline) -> list[QuizQuestion]:
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
        choices = [_parse_choice(number, c_number, c, q_line, first_line, inline)
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
        questions.append(QuizQuestion(text_value.strip(), inline(text_value.strip(), q_line), choices, q_line,
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


def _parse_choice(number: int, c_number: int, data, q_line: int, first_line: int, inline: Inline) -> QuizChoice:
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
    return QuizChoice(text_value.strip(), inline(text_value.strip(), c_line), correct,
                      explanation.strip(), inline(explanation.strip(), c_line), id=c_id, line=c_line,
                      column=c_column)
