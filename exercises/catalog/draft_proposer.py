"""A draft proposer for speculative decoding: prompt lookup (n-gram), the draft that needs no model at all."""
from __future__ import annotations

from .base import Case, Exercise, call

PROMPT = """\
Speculative decoding needs a cheap **draft** to guess the next tokens; the model then checks all the guesses in one
forward pass. The cheapest draft has no model at all: **prompt lookup**. Text that repeats itself (code being
edited, a sentence being copied, a name said twice) is likely to go on the way it went on before.

Write `propose(context, k)`. `context` is the list of token ids so far (the prompt and what was generated), `k` the
most tokens to guess. Return the guesses, a list of at most `k` token ids:

1. Take the last `n` tokens of `context` (its suffix), for `n` = 3, then 2, then 1, never all of `context`.
2. Look for the same `n` tokens earlier: starting at a position before the suffix's own start (they may overlap it).
   Of those, take the **most recent** one (the one that starts latest).
3. At the first `n` that matches, return the (up to `k`) tokens that followed that occurrence.
4. When no `n` matches, or `k` is 0, return `[]`: this round decodes one token the plain way.
"""

STARTER = '''\
def propose(context, k):
    """Up to k guessed token ids that follow `context` (a list of token ids)."""
    # TODO: try the suffixes of 3, 2 and 1 tokens, and take their most recent earlier occurrence.
    last = context[-1]
    for i, token in enumerate(context[:-1]):
        if token == last:
            return context[i + 1:i + 1 + k]
    return []
'''

REFERENCE = '''\
def propose(context, k):
    size = len(context)
    if k <= 0:
        return []
    for n in range(min(3, size - 1), 0, -1):
        suffix = context[size - n:]
        for start in range(size - n - 1, -1, -1):
            if context[start:start + n] == suffix:
                return context[start + n:start + n + k]
    return []
'''

FN = "propose"

CASES = (
    Case("a repeated phrase", call(FN, [5, 6, 7, 8, 9, 5, 6, 7], 3), [8, 9, 5]),
    Case("at most k tokens", call(FN, [5, 6, 7, 8, 9, 5, 6, 7], 1), [8]),
    Case("the longest suffix first", call(FN, [3, 1, 2, 9, 5, 1, 2, 8, 3, 1, 2], 2), [9, 5],
         hint="The 3-token suffix [3, 1, 2] occurs at the start: it wins over the later [1, 2]."),
    Case("the most recent occurrence", call(FN, [1, 2, 3, 1, 2, 4, 1, 2], 2), [4, 1],
         hint="[1, 2] occurs at positions 0 and 3: the later one is followed by 4."),
    Case("no match, no guess", call(FN, [1, 2, 3, 4], 4), []),
    Case("one token of context", call(FN, [42], 3), []),
    Case("an occurrence overlapping the suffix", call(FN, [4, 4, 4, 4], 3), [4]),
    Case("k = 0", call(FN, [1, 2, 1], 0), []),
    Case("hidden 1", call(FN, [10, 11, 12, 13, 10, 11, 12], 4), [13, 10, 11, 12], hidden=True),
    Case("hidden 2", call(FN, [1, 2, 1, 2, 1, 2], 2), [1, 2], hidden=True),
    Case("hidden 3", call(FN, [9, 8, 7, 6, 5], 3), [], hidden=True),
    Case("hidden 4", call(FN, [5, 1, 5, 2, 5], 2), [2, 5], hidden=True),
)

EXERCISE = Exercise(
    id="draft-proposer", title="A draft proposer: prompt lookup", prompt=PROMPT, starter=STARTER,
    reference=REFERENCE, cases=CASES, functions=(FN,),
    summary="Guess the next k tokens by finding the context's last tokens earlier in it: a draft with no model.")
