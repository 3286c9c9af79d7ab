"""The token mask of constrained decoding: from an automaton over characters and a vocabulary of multi-character
tokens, which tokens may come next (the trap: checking only a token's first character, when a token can run past
a boundary of the grammar and must fit all the way)."""
from __future__ import annotations

from .base import Case, Exercise, call

FN = "allowed_tokens"

PROMPT = """\
A structured-output engine compiles a pattern (or a JSON schema) into an automaton over **characters**, but the
model chooses **tokens**, each several characters long. Before every step it computes the mask: the tokens the
automaton can read whole from where the reply stands.

Write `allowed_tokens(vocab, dfa, accepting, state, eos)`, the sorted list of token ids allowed from `state`:

* `vocab[i]` is token i's text; `dfa[s][c]` is the state after reading character `c` in state `s` (no entry: the
  pattern cannot continue with `c`); `accepting` lists the states where the reply may end.
* A token is allowed when reading **all** its characters from `state` never falls off the automaton. A token such
  as `'":'` crosses from one part of the grammar (the end of a key) into the next (the colon): it must fit in both.
* Token `eos` (its text is ignored) ends the reply: allowed only in an accepting state. An empty token is never
  allowed.

The automaton in the tests reads `{"n": ` then one or more digits then `}`, and a date `DD-DD`.
"""

STARTER = '''\
def allowed_tokens(vocab, dfa, accepting, state, eos):
    """Sorted ids of the tokens that can come next from `state`."""
    return sorted(i for i, text in enumerate(vocab) if i != eos and text and text[0] in dfa.get(state, {}))
'''

REFERENCE = '''\
def allowed_tokens(vocab, dfa, accepting, state, eos):
    allowed = []
    for i, text in enumerate(vocab):
        if i == eos:
            if state in accepting:
                allowed.append(i)
            continue
        at = state
        for ch in text:
            at = dfa.get(at, {}).get(ch)
            if at is None:
                break
        if text and at is not None:
            allowed.append(i)
    return allowed
'''

DIGITS = "0123456789"


def _chain(text: str, first: int) -> dict:
    return {f"s{first + i}": {ch: f"s{first + i + 1}"} for i, ch in enumerate(text)}


# {"n": <digits>}: s0 -{-> s1 -"-> s2 -n-> s3 -"-> s4 -:-> s5 -space-> s6 -digit-> s7 (digits loop) -}-> s8
JSON_DFA = {**_chain('{"n": ', 0), "s6": {d: "s7" for d in DIGITS}, "s7": {**{d: "s7" for d in DIGITS}, "}": "s8"}}
JSON_ACCEPT = ["s8"]
JSON_VOCAB = ['{"', "n", '":', " ", "4", "42", "}", '"}', "{", '":"', " 4", "4}", "<|im_end|>", ""]
JSON_EOS = 12
# DD-DD: d0 -digit-> d1 -digit-> d2 -'-'-> d3 -digit-> d4 -digit-> d5
DATE_DFA = {"d0": {d: "d1" for d in DIGITS}, "d1": {d: "d2" for d in DIGITS}, "d2": {"-": "d3"},
            "d3": {d: "d4" for d in DIGITS}, "d4": {d: "d5" for d in DIGITS}}
DATE_VOCAB = ["1", "12", "-", "2-", "-3", "123", "a", "<eos>", "12-34", ""]
HINT = "Read every character of the token from `state`: a token fits only if the automaton can read all of it."


def json_case(name: str, state: str, expected: list[int], **kw) -> Case:
    return Case(name, call(FN, JSON_VOCAB, JSON_DFA, JSON_ACCEPT, state, JSON_EOS), expected, **kw)


def date_case(name: str, state: str, expected: list[int], **kw) -> Case:
    return Case(name, call(FN, DATE_VOCAB, DATE_DFA, ["d5"], state, 7), expected, **kw)


CASES = (
    json_case("The start: '{' alone or '{\"' at once", "s0", [0, 8]),
    json_case("After the key's name: '\":' fits, '\":\"' and '\"}' run off the pattern", "s3", [2], hint=HINT),
    json_case("Before the number: a space, or a space and a digit in one token", "s5", [3, 10]),
    json_case("Inside the number: more digits, '}', or a digit and '}' in one token", "s7", [4, 5, 6, 11], hint=HINT),
    json_case("After '}': only the end of the reply", "s8", [12]),
    date_case("A date's start: one digit, two, or the whole date in one token", "d0", [0, 1, 8], hint=HINT),
    date_case("hidden 1", "d2", [2, 4], hidden=True),
    date_case("hidden 2", "d4", [0], hidden=True),
    date_case("hidden 3", "d5", [7], hidden=True),
    json_case("hidden 4", "s6", [4, 5, 11], hidden=True),
    date_case("hidden 5", "d3", [0, 1], hidden=True),
)

EXERCISE = Exercise(
    id="grammar-mask", title="The grammar's token mask", prompt=PROMPT, starter=STARTER, reference=REFERENCE,
    cases=CASES, functions=(FN,),
    summary="From an automaton over characters and a vocabulary of tokens, the tokens allowed at the next step.")
