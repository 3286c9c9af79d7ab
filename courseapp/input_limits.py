"""What one authored or requested value may cost: how long it is, how deep it nests, how many digits a number has.

Python refuses `int()` of more than 4,300 digits with a ValueError and nests parsers by recursion, so an
unchecked value of a few kilobytes ends in a 500 (or a RecursionError) instead of a message. Every parse
of a request's number and of authored JSON/YAML goes through these bounds first; each check costs time
linear in the text, nothing more. JSON that a user or a platform sends (a course zip's runs, a websocket
message, an LTI id_token) is read with `loads`; YAML with `safe_yaml.load`, which applies the same bounds.
"""
from __future__ import annotations

import json

# Demo/calculator props, quiz YAML and front matter nest a handful of levels; 32 is far past any real one.
MAX_NESTING = 32
# A number an author writes (an order, a token count) or a request sends (a revision id, a byte offset,
# a choice) fits in a 64-bit integer: 18 digits always do.
MAX_DIGITS = 18
# Any JSON writer prints a float in at most 24 characters (17 significant digits, sign, point, exponent); the
# rest is room for one written by hand. `float()` takes longer texts, but nothing sends them on purpose.
MAX_FLOAT_CHARS = 40


class InputTooComplex(ValueError):
    """A JSON text too long, nested too deep or holding too long a number; the message says which, in words
    fit to show the person (or platform) who sent it."""


class NumberTooLong(InputTooComplex):
    """A number with more digits than anything the course stores; the message says so."""

    def __init__(self, text: str, max_digits: int = MAX_DIGITS, unit: str = "digits"):
        shown = text if len(text) <= 24 else f"{text[:20]}… ({len(text):,} characters)"
        super().__init__(f"the number {shown} is too long: at most {max_digits} {unit}")


def parse_digits(text: str, max_digits: int = MAX_DIGITS) -> int | None:
    """The value of `text` when it is 1 to `max_digits` ASCII digits, else None (never int() on a long text)."""
    if not 0 < len(text) <= max_digits or not (text.isascii() and text.isdigit()):
        return None
    return int(text)


def bounded_int(text: str) -> int:
    """`int(text)` for a JSON number; NumberTooLong past `MAX_DIGITS` digits (json.loads' `parse_int`)."""
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise NumberTooLong(text)
    return int(text)


def json_nesting(text: str, limit: int = MAX_NESTING) -> int:
    """How deeply the arrays and objects of a JSON text nest, counting stops as soon as it passes `limit`.

    Brackets inside strings do not count. Linear in the text, whatever it holds, so it can run before
    `json.loads` (which recurses once per level and fails with a RecursionError near 1,000).
    """
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        elif char in "]}":
            depth -= 1
    return deepest


def loads(text: str | bytes, *, max_bytes: int, max_depth: int = MAX_NESTING,
          max_digits: int = MAX_DIGITS) -> object:
    """The value of the JSON `text` (bytes are read as UTF-8), once it is known to be cheap to build.

    Raises `InputTooComplex` (a ValueError) when the text is over `max_bytes` bytes of UTF-8, nests deeper
    than `max_depth`, or holds an integer of more than `max_digits` digits or a float written in more than
    `MAX_FLOAT_CHARS` characters; `json.JSONDecodeError` when it is not JSON and `UnicodeDecodeError` when
    bytes are not UTF-8 (ValueErrors both). Never a RecursionError, whatever the text (for a `max_depth` far
    under Python's recursion limit, as every caller's is).
    """
    size = len(text) if isinstance(text, bytes) or len(text) * 4 <= max_bytes else len(
        text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise InputTooComplex(f"the JSON is {size:,} bytes long: at most {max_bytes:,} are read")
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if json_nesting(text, max_depth) > max_depth:
        raise InputTooComplex(f"the JSON nests more than {max_depth} levels deep")

    def parse_int(digits: str) -> int:
        if len(digits.lstrip("-")) > max_digits:
            raise NumberTooLong(digits, max_digits)
        return int(digits)

    def parse_float(number: str) -> float:
        if len(number) > MAX_FLOAT_CHARS:
            raise NumberTooLong(number, MAX_FLOAT_CHARS, "characters")
        return float(number)

    return json.loads(text, parse_int=parse_int, parse_float=parse_float)
