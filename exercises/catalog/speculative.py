"""Speculative decoding's acceptance rule: greedy (keep the agreeing prefix) and stochastic (accept with probability
min(1, p/q), else resample the residual), the second checked against the target distribution."""
from __future__ import annotations

from .base import Case, Exercise, call, matches_distribution, repeat

PROMPT = """\
A small **draft** model proposes tokens; the large **target** model checks them all in one forward pass.
Write both acceptance rules.

**1. Greedy** — `greedy_accept(draft, target)`. `draft` is the list of proposed token ids; `target[i]` is the
target model's own greedy choice at position `i` (it has one more entry than `draft`: the token after the whole
draft). Return the tokens this round emits: the draft tokens up to the first one the target disagrees with, then
the target's token at that position (or, if every draft token was accepted, the extra one at the end).

**2. Stochastic** — `accept_or_resample(p, q, draft, u, v)`. `p` and `q` are the target's and the draft's
probabilities over the vocabulary at this position, `draft` the token the draft model sampled from `q`, and `u`, `v`
two uniform numbers in [0, 1). Accept the draft token when `u * q[draft] < p[draft]` (probability
min(1, p/q)). Otherwise sample from the **residual** `r = max(0, p − q)` (normalized) using `v`: return the smallest
index `i` with `v * sum(r) < r[0] + … + r[i]`.

Done right, the emitted tokens follow `p` exactly, whatever `q` is: a test draws 10,000 tokens from `q` and
compares what you emit with `p`.
"""

STARTER = '''\
def greedy_accept(draft, target):
    """The tokens one greedy speculative round emits."""
    # TODO: keep the draft tokens the target agrees with, then add the target's own next token.
    return list(draft)


def accept_or_resample(p, q, draft, u, v):
    """The token emitted at one position: the draft's, or one drawn from the residual max(0, p - q)."""
    # TODO: accept with probability min(1, p[draft] / q[draft]); otherwise sample the residual with v.
    return draft
'''

REFERENCE = '''\
def greedy_accept(draft, target):
    out = []
    for i, token in enumerate(draft):
        if token != target[i]:
            break
        out.append(token)
    out.append(target[len(out)])
    return out


def accept_or_resample(p, q, draft, u, v):
    if u * q[draft] < p[draft]:
        return draft
    residual = [max(0.0, pi - qi) for pi, qi in zip(p, q)]
    threshold = v * sum(residual)
    running = 0.0
    for i, r in enumerate(residual):
        running += r
        if threshold < running:
            return i
    return max(i for i, r in enumerate(residual) if r > 0)
'''

GREEDY, STOCHASTIC = "greedy_accept", "accept_or_resample"
P1, Q1 = [0.5, 0.3, 0.2], [0.2, 0.5, 0.3]
P2, Q2 = [0.4, 0.4, 0.2], [0.1, 0.3, 0.6]
P3, Q3 = [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]
P4, Q4 = [0.0, 0.5, 0.5, 0.0], [0.25, 0.25, 0.25, 0.25]
P5, Q5 = [0.05, 0.05, 0.6, 0.3], [0.7, 0.1, 0.1, 0.1]
MAX_TV = 0.025  # 10,000 draws: a right rule lands within ~0.01; sampling from q or from p instead of the
# residual is 0.14 off on P3/Q3


def _sampled(p: list[float], q: list[float], seed: int) -> dict:
    return repeat(STOCHASTIC, [p, q], n=10_000, seed=seed, gen="draft")


def _target(p: list[float]) -> dict[int, float]:
    return {i: x for i, x in enumerate(p) if x > 0}


CASES = (
    Case("greedy: every draft token agrees, plus the bonus token", call(GREEDY, [5, 7, 9], [5, 7, 9, 11]),
         [5, 7, 9, 11]),
    Case("greedy: the second token disagrees", call(GREEDY, [5, 7, 9], [5, 8, 9, 11]), [5, 8],
         hint="Stop at the first disagreement and emit the target's token there; drop the rest of the draft."),
    Case("greedy: the first token disagrees", call(GREEDY, [4], [3, 2]), [3]),
    Case("greedy: an empty draft still emits one token", call(GREEDY, [], [6]), [6]),
    Case("stochastic: p > q, always accepted", call(STOCHASTIC, P1, Q1, 0, 0.99, 0.5), 0),
    Case("stochastic: p/q = 0.6 and u = 0.5, accepted", call(STOCHASTIC, P1, Q1, 1, 0.5, 0.9), 1),
    Case("stochastic: p/q = 0.6 and u = 0.7, resampled from the residual", call(STOCHASTIC, P1, Q1, 1, 0.7, 0.9), 0,
         hint="Rejected: draw from max(0, p - q), which here is only positive at token 0."),
    Case("stochastic: resampling picks by v along the residual", call(STOCHASTIC, P2, Q2, 2, 0.5, 0.8), 1),
    Case("stochastic: 10,000 tokens drafted from q follow p", _sampled(P3, Q3, 1234), check=matches_distribution(
        _target(P3), MAX_TV), shown=f"10,000 rounds: p = {P3}, q = {Q3}, the draft token drawn from q "
                                    "(random.Random(1234)), u and v uniform",
         expected_shown="the frequencies of p"),
    Case("hidden 1", call(GREEDY, [1, 2, 3, 4], [1, 2, 3, 5, 8]), [1, 2, 3, 5], hidden=True),
    Case("hidden 2", call(GREEDY, [2, 2], [2, 2, 2]), [2, 2, 2], hidden=True),
    Case("hidden 3", call(STOCHASTIC, P2, Q2, 2, 0.5, 0.7), 0, hidden=True),
    Case("hidden 4", call(STOCHASTIC, P4, Q4, 0, 0.0, 0.5), 2, hidden=True),
    Case("hidden 5", _sampled(P4, Q4, 99), check=matches_distribution(_target(P4), MAX_TV), hidden=True),
    Case("hidden 6", _sampled(P5, Q5, 7), check=matches_distribution(_target(P5), MAX_TV), hidden=True),
)

EXERCISE = Exercise(
    id="speculative-acceptance", title="Speculative decoding: the acceptance rule", prompt=PROMPT, starter=STARTER,
    reference=REFERENCE, cases=CASES, functions=(GREEDY, STOCHASTIC),
    summary="Which drafted tokens a speculative round keeps, greedy and sampled, so the output follows the target.")
