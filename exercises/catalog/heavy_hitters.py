"""H2O's eviction choice: which tokens a cache of `budget` keeps, given the attention each has accumulated (the trap:
keeping the top scores alone, which evicts the newest tokens, or breaking ties towards the newer token)."""
from __future__ import annotations

from .base import Case, Exercise, call

FN = "h2o_keep"

PROMPT = """\
Write `h2o_keep(accumulated, budget)`: the positions a KV cache of `budget` tokens keeps under H2O ("heavy
hitters"), given `accumulated[j]`, the attention token j has received from every query so far, for the tokens
now in the cache, oldest first (the last one has just arrived).

* With at most `budget` tokens, keep them all.
* Otherwise keep the most recent `budget - budget // 2` tokens, whatever their scores: a token that has just
  arrived has had no time to accumulate attention.
* Fill the other `budget // 2` places with the older tokens that have accumulated the **most** attention.
  On a tie, keep the newer token (the oldest leaves first).

Return the kept positions in increasing order. With `budget` 4 and `accumulated` `[2.0, 0.1, 0.7, 0.2, 0.0]`, the
2 most recent (3 and 4) stay, and of 0, 1, 2 the two heaviest, 0 and 2: `[0, 2, 3, 4]`.
"""

STARTER = '''\
def h2o_keep(accumulated, budget):
    """Positions kept, in increasing order."""
    ranked = sorted(range(len(accumulated)), key=lambda j: accumulated[j], reverse=True)
    return sorted(ranked[:budget])
'''

REFERENCE = '''\
def h2o_keep(accumulated, budget):
    n = len(accumulated)
    if n <= budget:
        return list(range(n))
    recent = budget - budget // 2
    older = range(n - recent)
    heavy = sorted(older, key=lambda j: (accumulated[j], j), reverse=True)[: budget // 2]
    return sorted(heavy) + list(range(n - recent, n))
'''

RECENT_HINT = "The newest budget − budget // 2 tokens stay whatever their scores: they have had no time to collect any."
TIE_HINT = "On equal scores the older token leaves first, so the newer one is kept."
SINK = [9.5, 0.3, 0.2, 0.4, 0.1, 0.6, 0.2, 0.3, 0.1, 0.0]  # the first token takes most of the weight: a sink

CASES = (
    Case("The lesson's example: budget 4, five tokens", call(FN, [2.0, 0.1, 0.7, 0.2, 0.0], 4), [0, 2, 3, 4],
         hint=RECENT_HINT),
    Case("Still room: three tokens, budget 4", call(FN, [0.5, 0.2, 0.0], 4), [0, 1, 2]),
    Case("The first token is a heavy hitter: H2O keeps the sink", call(FN, SINK, 6), [0, 3, 5, 7, 8, 9],
         hint=RECENT_HINT),
    Case("A tie among the older tokens", call(FN, [0.4, 0.4, 0.4, 0.1, 0.0], 4), [1, 2, 3, 4], hint=TIE_HINT),
    Case("An odd budget: 3 recent, 2 heavy", call(FN, [0.1, 3.0, 0.2, 2.0, 0.3, 0.0, 0.0, 0.0], 5),
         [1, 3, 5, 6, 7], hint=RECENT_HINT),
    Case("hidden 1", call(FN, [1.0] * 8, 4), [4, 5, 6, 7], hidden=True),
    Case("hidden 2", call(FN, [0.0, 5.0, 0.0, 4.0, 0.0, 3.0, 0.0], 2), [1, 6], hidden=True),
    Case("hidden 3", call(FN, [], 4), [], hidden=True),
    Case("hidden 4", call(FN, [0.3, 0.2, 0.1], 1), [2], hidden=True),
    Case("hidden 5", call(FN, SINK, 10), list(range(10)), hidden=True),
)

EXERCISE = Exercise(
    id="heavy-hitters", title="Heavy hitters: H2O's eviction choice", prompt=PROMPT, starter=STARTER,
    reference=REFERENCE, cases=CASES, functions=(FN,),
    summary="Which tokens a KV cache of a fixed budget keeps: the most recent half, and the heaviest older ones.")
