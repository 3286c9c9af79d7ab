"""What one authored or requested value may cost: how deep it nests, how many digits a number has.

Python refuses `int()` of more than 4,300 digits with a ValueError and nests parsers by recursion, so an
unchecked value of a few kilobytes ends in a 500 (or a RecursionError) instead of a message. Every parse
of a request's number and of authored JSON/YAML goes through these bounds first; each check costs time
linear in the text, nothing more.
"""
from __future__ import annotations

# Demo/calculator props, quiz YAML and front matter nest a handful of levels; 32 is far past any real one.
MAX_NESTING = 32
# A number an author writes (an order, a token count) or a request sends (a revision id, a byte offset,
# a choice) fits in a 64-bit integer: 18 digits always do.
MAX_DIGITS = 18


class NumberTooLong(ValueError):
    """A number with more digits than anything the course stores; the message says so."""

    def __init__(self, text: str, max_digits: int = MAX_DIGITS):
        shown = text if len(text) <= 24 else f"{text[:20]}… ({len(text)} characters)"
        super().__init__(f"the number {shown} is too long: at most {max_digits} digits")


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
