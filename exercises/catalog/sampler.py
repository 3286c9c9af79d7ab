"""A sampler: temperature, top-k and top-p over a list of logits, driven by one uniform number."""
from __future__ import annotations

from .base import Case, Exercise, call, matches_distribution, repeat

PROMPT = """\
Write `sample(logits, temperature, top_k, top_p, u)`, which picks the next token from the model's `logits` (a list
of floats) with the usual knobs, using the uniform number `u` in [0, 1) as its only randomness:

1. `temperature == 0`: return the index of the largest logit (the lowest such index on a tie); ignore the rest.
2. Otherwise turn `logits / temperature` into probabilities with a softmax (subtract the largest logit first, so
   that `exp` cannot overflow).
3. `top_k > 0`: keep only the `top_k` most probable tokens (on a tie the lower index first); `top_k == 0` keeps all.
4. `top_p < 1`: of the tokens still kept, renormalized, keep the most probable ones (same tie rule) until their
   probabilities add up to at least `top_p`; drop the rest. `top_p == 1` keeps all.
5. Renormalize what is left and walk it in **index order**: return the first index whose cumulative probability is
   greater than `u`.

A test calls your function 10,000 times with fresh values of `u` and compares the frequencies with the
distribution these rules give.
"""

STARTER = '''\
import math


def sample(logits, temperature, top_k, top_p, u):
    """The index of the token chosen from `logits`, with `u` uniform in [0, 1)."""
    weights = [math.exp(x) for x in logits]  # TODO: temperature, and a max subtracted first
    # TODO: temperature 0 is greedy; then top-k, then top-p
    threshold = u * sum(weights)
    running = 0.0
    for i, w in enumerate(weights):
        running += w
        if threshold < running:
            return i
    return len(weights) - 1
'''

REFERENCE = '''\
import math


def sample(logits, temperature, top_k, top_p, u):
    n = len(logits)
    if temperature == 0:
        return max(range(n), key=lambda i: (logits[i], -i))
    top = max(logits)
    weights = [math.exp((x - top) / temperature) for x in logits]
    order = sorted(range(n), key=lambda i: (-weights[i], i))
    if top_k > 0:
        for i in order[top_k:]:
            weights[i] = 0.0
        order = order[:top_k]
    if top_p < 1.0:
        total = sum(weights[i] for i in order)
        running, keep = 0.0, 0
        for i in order:
            running += weights[i]
            keep += 1
            if running >= top_p * total:
                break
        for i in order[keep:]:
            weights[i] = 0.0
    threshold = u * sum(weights)
    running = 0.0
    for i, w in enumerate(weights):
        running += w
        if threshold < running:
            return i
    return max(i for i, w in enumerate(weights) if w > 0)
'''

FN = "sample"
MAX_TV = 0.025


def sampled(logits: list[float], temperature: float, top_k: int, top_p: float, seed: int) -> dict:
    return repeat(FN, [logits, temperature, top_k, top_p], n=10_000, seed=seed, gen="uniform_last")


CASES = (
    Case("temperature 0 is greedy", call(FN, [1.0, 3.0, 2.0], 0, 0, 1.0, 0.99), 1),
    Case("temperature 0: a tie goes to the lower index", call(FN, [2.0, 5.0, 5.0], 0, 0, 1.0, 0.5), 1),
    Case("equal logits: u walks the tokens in index order", call(FN, [0.0, 0.0, 0.0, 0.0], 1.0, 0, 1.0, 0.3), 1),
    Case("temperature 1", call(FN, [2.0, 1.0, 0.0], 1.0, 0, 1.0, 0.7), 1),
    Case("temperature 0.5 sharpens the distribution", call(FN, [2.0, 1.0, 0.0], 0.5, 0, 1.0, 0.7), 0,
         hint="Divide the logits by the temperature before the softmax."),
    Case("top-k 2 keeps tokens 1 and 2", call(FN, [1.0, 4.0, 3.0, 2.0], 1.0, 2, 1.0, 0.95), 2),
    Case("top-p 0.8 keeps tokens 0 and 1", call(FN, [3.0, 2.0, 1.0, 0.0], 1.0, 0, 0.8, 0.95), 1,
         hint="Token 0 has 64% and token 1 24%: together they pass 0.8, so token 2 (9%) is dropped."),
    Case("10,000 draws with top-p 0.9", sampled([2.0, 1.0, 0.0, -1.0], 1.0, 0, 0.9, 2024),
         check=matches_distribution({0: 0.6652, 1: 0.2447, 2: 0.0900}, MAX_TV),
         shown="10,000 calls: logits [2.0, 1.0, 0.0, -1.0], temperature 1, top_k 0, top_p 0.9, u uniform "
               "(random.Random(2024))",
         expected_shown="token 0: 66.5%, token 1: 24.5%, token 2: 9.0%, token 3: never"),
    Case("hidden 1", call(FN, [0.5, 2.5, 2.0, 1.0, 3.0], 0.8, 3, 0.7, 0.3), 1, hidden=True),
    Case("hidden 2", call(FN, [1.0, 0.5, 2.0], 1.0, 10, 1.0, 0.9), 2, hidden=True),
    Case("hidden 3", call(FN, [1.0, 0.5, 2.0, 2.0], 0, 2, 0.5, 0.1), 2, hidden=True),
    Case("hidden 4", sampled([1.0, 2.0, 3.0, 0.5], 0.7, 3, 1.0, 5),
         check=matches_distribution({0: 0.0443, 1: 0.1848, 2: 0.7710}, MAX_TV), hidden=True),
    Case("hidden 5", sampled([0.0, 1.5, 1.0, 3.0, -2.0], 1.3, 4, 0.8, 6),
         check=matches_distribution({1: 0.2398, 3: 0.7602}, MAX_TV), hidden=True),
)

EXERCISE = Exercise(
    id="sampler", title="A sampler: temperature, top-k, top-p", prompt=PROMPT, starter=STARTER, reference=REFERENCE,
    cases=CASES, functions=(FN,),
    summary="Turn logits into a token with temperature, top-k and top-p, from one uniform number.")
