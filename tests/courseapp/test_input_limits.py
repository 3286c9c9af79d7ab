"""`input_limits.loads`, the one bounded JSON reader for what users and platforms send: what it refuses, in what
words, and that it refuses nothing real (the end-to-end cases are in the zip import, LTI and websocket tests)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from courseapp.input_limits import InputTooComplex, NumberTooLong, loads

REPO_RUN = Path(__file__).resolve().parents[2] / "content" / "runs" / "kv-cache.json"


def test_real_json_reads_as_json_loads_reads_it():
    data = REPO_RUN.read_bytes()
    assert loads(data, max_bytes=len(data)) == json.loads(data)
    text = '{"prompt": "[[[[{{{{ \\" ]]]] not structure", "n": -123456789012345678, "t": 0.22062597100011772}'
    assert loads(text, max_bytes=200, max_depth=1) == json.loads(text)  # brackets inside a string do not nest


@pytest.mark.parametrize("text, max_bytes, error, words", [
    ("[" * 100_000 + "]" * 100_000, 1_000_000, InputTooComplex, "the JSON nests more than 32 levels deep"),
    ('{"a": ' * 33 + "1" + "}" * 33, 1000, InputTooComplex, "the JSON nests more than 32 levels deep"),
    ("9" * 5000, 10_000, NumberTooLong, "(5,000 characters) is too long: at most 18 digits"),
    ("-1234567890123456789", 100, NumberTooLong, "-1234567890123456789 is too long: at most 18 digits"),
    ("1." + "5" * 5000, 10_000, NumberTooLong, "is too long: at most 40 characters"),
    ('"' + "é" * 600 + '"', 1000, InputTooComplex, "the JSON is 1,202 bytes long: at most 1,000 are read"),
    (b"[" + b"1," * 600 + b"1]", 1000, InputTooComplex, "the JSON is 1,203 bytes long"),
    ("[1, 2", 100, json.JSONDecodeError, "Expecting"),
    (b"\xff[]", 100, UnicodeDecodeError, "can't decode"),
])
def test_what_is_refused_and_in_what_words(text, max_bytes, error, words):
    started = time.process_time()
    with pytest.raises(error) as caught:
        loads(text, max_bytes=max_bytes)
    assert time.process_time() - started < 1.0
    assert words in str(caught.value)
    assert isinstance(caught.value, ValueError)  # every refusal is a ValueError, never a RecursionError
