"""Every exercise's tests pass on its reference solution and fail on its starter code (real sandbox), hidden inputs
never reach anything the browser gets, and the grading's comparisons and messages."""
from __future__ import annotations

import ast
import json

import pytest

from exercises import catalog, seccomp
from exercises.catalog.base import matches_distribution
from exercises.grading import same
from exercises.runner import evaluate, payload

EXERCISES = list(catalog.EXERCISES.values())
IDS = [e.id for e in EXERCISES]


def test_the_issue_s_five_exercises_are_there():
    assert set(IDS) >= {"kv-cache-bytes", "speculative-acceptance", "paged-block-allocator", "sampler", "roofline"}


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_reference_passes_every_test(exercise, sandbox_ready):
    result = evaluate(exercise, exercise.reference)
    failed = [(t["name"], t["message"]) for t in result["tests"] if not t["passed"]]
    assert result["passed"] and not failed, failed
    assert result["n_tests"] == len(exercise.cases) and result["problem"] == ""


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_starter_fails_visible_and_hidden_tests(exercise, sandbox_ready):
    result = evaluate(exercise, exercise.starter)
    assert not result["passed"] and result["problem"] == ""  # it loads: it is wrong, not broken
    assert any(not t["passed"] for t in result["tests"] if not t["hidden"])
    assert any(not t["passed"] for t in result["tests"] if t["hidden"])
    for test in result["tests"]:
        if not test["passed"] and not test["hidden"]:
            assert test["message"], test


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_cases_are_well_formed(exercise):
    assert exercise.visible and exercise.hidden
    for code in (exercise.starter, exercise.reference):
        names = {node.name for node in ast.parse(code).body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        assert set(exercise.functions) <= names
    for case in exercise.cases:
        json.dumps(case.call)  # it travels to the sandbox as JSON
        assert case.call["fn"] in exercise.functions
        assert (case.check is None) == (case.call["kind"] != "repeat")
        if case.hidden:
            assert case.name.startswith("hidden ") and not case.hint  # nothing about the input


def test_gqa_trap_has_the_issue_s_figures():
    kv = catalog.get("kv-cache-bytes")
    llama = next(c for c in kv.cases if c.name.startswith("Llama 3 8B, one token"))
    assert llama.expected == 32 * 8 * 128 * 2 * 2 == 128 * 1024
    smol = next(c for c in kv.cases if c.name.startswith("SmolLM2-135M"))
    assert smol.expected == 30 * 3 * 64 * 2 * 2 * 2048


def test_visible_sandbox_payload_holds_no_hidden_input_or_any_expected_value():
    for exercise in EXERCISES:
        sent = json.dumps(payload(exercise.visible))
        assert "expected" not in sent
        for case in exercise.hidden:
            assert json.dumps(case.call) not in sent


SPY = '''
import gc, json, os

def _dump():
    found = []
    for obj in gc.get_objects():
        if isinstance(obj, dict) and "fn" in obj and "kind" in obj:
            found.append(json.dumps(obj))
    print("SPY", len(found), "\\n".join(found))

_dump()
'''


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_code_that_dumps_the_harness_memory_shows_no_hidden_input(exercise, sandbox_ready):
    """The spy finds every call the harness holds and prints it: the visible ones come back in the output (so
    the spy works), the hidden ones never do, since they live only in a sandbox whose output is discarded."""
    result = evaluate(exercise, SPY + exercise.reference)
    text = json.dumps(result)
    assert "SPY" in result["output"]
    assert json.dumps(exercise.visible[0].call["fn"]) in result["output"]
    for case in exercise.hidden:
        assert json.dumps(case.call) not in text and json.dumps(case.call) not in result["output"]
        if "args" in case.call:
            assert json.dumps(case.call["args"]) not in text
    for test in result["tests"]:
        if test["hidden"]:
            assert set(test) == {"name", "hidden", "passed", "message"}


def test_hidden_failures_say_nothing_about_their_input(sandbox_ready):
    sampler = catalog.get("sampler")
    leaky = "def sample(logits, temperature, top_k, top_p, u):\n    raise ValueError(repr(logits))\n"
    result = evaluate(sampler, leaky)
    for test in result["tests"]:
        if test["hidden"]:
            assert test["message"] == "Your code raised ValueError on a hidden input."
        else:
            assert "ValueError (line 2)" in test["message"]  # a visible test shows the exception's text
    wrong = evaluate(sampler, "def sample(*args):\n    return 0\n")
    assert {t["message"] for t in wrong["tests"] if t["hidden"] and not t["passed"]} == {
        "A hidden test failed (its input is not shown)."}


def test_same_compares_numbers_with_tolerance_and_types_strictly():
    assert same(131072, 131072.0) and not same(131072, 131073)
    assert same(0.1 + 0.2, 0.3, rel_tol=1e-9) and not same(1.0, 1.01, rel_tol=1e-6)
    assert not same(1, True) and not same(True, 1) and not same("1", 1) and not same(None, 0)
    assert same([1, {"raises": "ValueError"}], [1, {"raises": "ValueError"}])
    assert not same([1, 2], [1, 2, 3]) and not same({"a": 1}, {"a": 1, "b": 2})
    assert not same(float("nan"), float("nan"))


def test_distribution_check_names_the_frequencies():
    check = matches_distribution({0: 0.5, 1: 0.5}, 0.02)
    assert check({"0": 5000, "1": 5000}) is None
    message = check({"0": 9000, "1": 1000})
    assert "token 0: 90.0%" in message and "token 0: 50.0%" in message and "0.400" in message
    assert check({'"a"': 10}) == "Your function should return a token index (an int) every time."


def test_seccomp_program_is_whole_instructions_and_knows_its_architectures():
    for machine in seccomp.ARCHES:
        prog = seccomp.program(machine)
        assert len(prog) % 8 == 0 and len(prog) // 8 < 255
    with pytest.raises(seccomp.UnsupportedArchitecture):
        seccomp.program("riscv64")
    assert "fork" not in seccomp.denied_numbers("aarch64") and seccomp.denied_numbers("x86_64")["fork"] == 57
