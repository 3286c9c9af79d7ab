"""FlashAttention's online softmax: attention computed tile by tile, the running sum and output rescaled whenever the
running maximum rises (the trap: forgetting that rescale), checked against exact attention."""
from __future__ import annotations

import math

from .base import Case, Exercise, call

UPDATE, ATTEND = "online_update", "tiled_attention"

PROMPT = """\
FlashAttention never holds a query's whole row of scores. It walks the keys **tile by tile** and keeps three running
numbers per query: the largest score seen so far `m`, the softmax denominator `l = Σ exp(score − m)`, and the
unnormalised output `acc = Σ exp(score − m) · value`. At the end the output is `acc / l`: exactly softmax attention.

**1.** `online_update(state, scores, values)` folds one tile into the state and returns the new `[m, l, acc]`.
`state` is `None` before the first tile, else `[m, l, acc]` (`acc` a list of floats); `scores` are this query's
scores for the tile's keys and `values` the tile's value vectors. When the tile holds a score above `m`, everything
accumulated so far was weighted with the old maximum.

**2.** `tiled_attention(q, keys, values, tile_size)`: the attention output for one query (scores `q·k / √d`, `d` the
length of `q`), computed by walking `keys` and `values` in tiles of `tile_size` (the last tile may be shorter) with
`online_update`.

Subtracting the running maximum is what keeps `exp` from overflowing: a score of 1,000 is fine.
"""

STARTER = '''\
import math


def online_update(state, scores, values):
    """Fold one tile (this query's scores and the tile's value vectors) into [m, l, acc]."""
    if state is None:
        m, l, acc = float("-inf"), 0.0, [0.0] * len(values[0])
    else:
        m, l, acc = state
    m_new = max([m] + list(scores))
    for s, v in zip(scores, values):
        w = math.exp(s - m_new)
        l += w
        acc = [a + w * x for a, x in zip(acc, v)]
    # What was summed before this tile was weighted by exp(score − m), not exp(score − m_new)...
    return [m_new, l, acc]


def tiled_attention(q, keys, values, tile_size):
    """softmax(q·K / √d) · V for one query, one tile of keys at a time."""
    d = len(q)
    state = None
    for start in range(0, len(keys), tile_size):
        scores = [sum(a * b for a, b in zip(q, k)) / math.sqrt(d) for k in keys[start:start + tile_size]]
        state = online_update(state, scores, values[start:start + tile_size])
    m, l, acc = state
    return [a / l for a in acc]
'''

REFERENCE = '''\
import math


def online_update(state, scores, values):
    m, l, acc = state if state is not None else (float("-inf"), 0.0, [0.0] * len(values[0]))
    m_new = max([m] + list(scores))
    scale = math.exp(m - m_new)  # exp(-inf) = 0 before the first tile
    l, acc = l * scale, [a * scale for a in acc]
    for s, v in zip(scores, values):
        w = math.exp(s - m_new)
        l += w
        acc = [a + w * x for a, x in zip(acc, v)]
    return [m_new, l, acc]


def tiled_attention(q, keys, values, tile_size):
    scale, state = 1 / math.sqrt(len(q)), None
    for start in range(0, len(keys), tile_size):
        scores = [sum(a * b for a, b in zip(q, k)) * scale for k in keys[start:start + tile_size]]
        state = online_update(state, scores, values[start:start + tile_size])
    m, l, acc = state
    return [a / l for a in acc]
'''


def exact_attention(q: list, keys: list, values: list) -> list[float]:
    """The whole row of scores at once (max-subtracted softmax): what every tiling must reproduce."""
    scores = [sum(a * b for a, b in zip(q, k)) / math.sqrt(len(q)) for k in keys]
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    total = sum(weights)
    return [sum(w * v[j] for w, v in zip(weights, values)) / total for j in range(len(values[0]))]


def folded(state: list | None, scores: list, values: list) -> list:
    """The expected state after one tile, written out from the definition (not incrementally)."""
    m_old, l_old, acc_old = state if state is not None else (float("-inf"), 0.0, [0.0] * len(values[0]))
    m = max([m_old] + scores)
    keep = math.exp(m_old - m)
    weights = [math.exp(s - m) for s in scores]
    acc = [a * keep + sum(w * v[j] for w, v in zip(weights, values)) for j, a in enumerate(acc_old)]
    return [m, l_old * keep + sum(weights), acc]


def _vectors(seed: int, n: int, d: int, spread: float) -> list[list[float]]:
    """Deterministic pseudo-random vectors (no `random` state shared with anything else)."""
    out, x = [], seed
    for _ in range(n):
        row = []
        for _ in range(d):
            x = (x * 1103515245 + 12345) % 2**31
            row.append(round((x / 2**31 - 0.5) * spread, 3))
        out.append(row)
    return out


REL = 1e-9
RISING_HINT = ("When a tile holds a score above the running maximum, multiply the old l and acc by "
               "exp(m_old − m_new) before adding the tile.")
Q4 = [0.5, -1.0, 2.0, 0.25]
K6, V6 = _vectors(7, 6, 4, 4.0), _vectors(11, 6, 4, 2.0)
BIG_Q, BIG_K, BIG_V = [40.0, 40.0], [[10.0, 10.0], [20.0, 20.0], [25.0, 25.0]], [[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]


def _attend_case(name: str, q, keys, values, tile: int, **extra) -> Case:
    return Case(name, call(ATTEND, q, keys, values, tile), exact_attention(q, keys, values), rel_tol=REL, **extra)


def _update_case(name: str, state, scores, values, **extra) -> Case:
    return Case(name, call(UPDATE, state, scores, values), folded(state, scores, values), rel_tol=REL, **extra)


CASES = (
    _update_case("the first tile (state None)", None, [1.0, 2.0], [[1.0, 0.0], [0.0, 1.0]]),
    _update_case("a tile whose scores stay under the running maximum", [5.0, 2.0, [1.0, 3.0]], [1.0, 4.0],
                 [[2.0, 2.0], [0.0, -1.0]]),
    _update_case("a tile that raises the running maximum from 1 to 3", [1.0, 1.0, [2.0, 0.0]], [3.0], [[0.0, 4.0]],
                 hint=RISING_HINT),
    _attend_case("6 keys in tiles of 2, checked against exact attention", Q4, K6, V6, 2, hint=RISING_HINT),
    _attend_case("scores of 565 to 1,414: exp must not overflow", BIG_Q, BIG_K, BIG_V, 1,
                 hint="Subtract the running maximum inside every exp."),
    _update_case("hidden 1", [0.5, 3.0, [1.0, -2.0, 0.5]], [2.0, -1.0, 0.75],
                 [[1.0, 1.0, 1.0], [0.0, 2.0, 0.0], [-1.0, 0.0, 3.0]], hidden=True),
    _attend_case("hidden 2", Q4, K6, V6, 4, hidden=True),
    _attend_case("hidden 3", Q4, K6, V6, 1, hidden=True),
    _attend_case("hidden 4", Q4, K6, V6, 6, hidden=True),
    _attend_case("hidden 5", [3.0, 1.0, -2.0], _vectors(3, 9, 3, 10.0), _vectors(5, 9, 3, 1.0), 4, hidden=True),
    _attend_case("hidden 6", BIG_Q, BIG_K[::-1] + BIG_K, BIG_V[::-1] + BIG_V, 2, hidden=True),
)

EXERCISE = Exercise(
    id="online-softmax", title="FlashAttention's online softmax", prompt=PROMPT, starter=STARTER,
    reference=REFERENCE, cases=CASES, functions=(UPDATE, ATTEND),
    summary="Attention one tile of keys at a time with a running maximum and sum, exactly equal to softmax attention.")
