"""Tensor parallelism by hand: a weight matrix split by columns or by rows across ranks, the collective that makes the
product whole again (all-gather or all-reduce), and Megatron's MLP pair that needs one all-reduce for two matmuls
(the trap: adding row-split partials by concatenating them, or applying the nonlinearity to partial sums)."""
from __future__ import annotations

from .base import Case, Exercise, call

MATMUL, MLP = "tensor_parallel_matmul", "parallel_mlp"

PROMPT = """\
Matrices are lists of rows. `x` is `tokens × d_in`, `w` is `d_in × d_out`, and `x @ w` is the product one device
would compute. Split the work across `n_ranks` ranks; a dimension that does not divide evenly gives the first ranks
one more (7 columns on 2 ranks: 4 and 3, as our 9 heads go 6 and 3).

**1.** `tensor_parallel_matmul(x, w, n_ranks, split)` returns `{"partials": [...], "collective": ..., "result": ...}`:

* `split == "column"`: rank r holds a block of `w`'s **columns** and computes `x @ w_r`, its columns of the output.
  The output is those blocks side by side: the collective is `"all-gather"`.
* `split == "row"`: rank r holds a block of `w`'s **rows** and the matching columns of `x`, and computes
  `x_r @ w_r`: a full-size matrix that is only part of the answer. The collective is `"all-reduce"` (sum).

`partials` lists each rank's own matrix, `result` the combined one: exactly `x @ w`.

**2.** `parallel_mlp(x, a, b, n_ranks)`: the MLP `relu(x @ a) @ b` as Megatron-LM splits it: `a` by columns, `b` by
the matching rows, so that each rank computes `relu(x @ a_r) @ b_r` with no communication in between. Return
`{"partials": [...], "all_reduces": n, "result": ...}`, `n` the number of all-reduces one forward needs.
"""

STARTER = '''\
def blocks(n, n_ranks):
    """[lo, hi) of each rank's share of n: the first ranks take the extra."""
    sizes = [n // n_ranks + (r < n % n_ranks) for r in range(n_ranks)]
    starts = [sum(sizes[:r]) for r in range(n_ranks)]
    return [(s, s + k) for s, k in zip(starts, sizes)]


def matmul(x, w):
    return [[sum(a * b for a, b in zip(row, col)) for col in zip(*w)] for row in x]


def tensor_parallel_matmul(x, w, n_ranks, split):
    if split == "column":
        parts = [matmul(x, [row[lo:hi] for row in w]) for lo, hi in blocks(len(w[0]), n_ranks)]
    else:
        parts = [matmul([row[lo:hi] for row in x], w[lo:hi]) for lo, hi in blocks(len(w), n_ranks)]
    # Every split glued side by side?
    result = [sum((p[i] for p in parts), []) for i in range(len(x))]
    return {"partials": parts, "collective": "all-gather", "result": result}


def parallel_mlp(x, a, b, n_ranks):
    # Split a by rows, apply relu on each rank, then b whole: is relu of a partial sum the relu of the sum?
    parts = []
    for lo, hi in blocks(len(a), n_ranks):
        h = matmul([row[lo:hi] for row in x], a[lo:hi])
        parts.append(matmul([[max(v, 0) for v in row] for row in h], b))
    result = [[sum(p[i][j] for p in parts) for j in range(len(b[0]))] for i in range(len(x))]
    return {"partials": parts, "all_reduces": 1, "result": result}
'''

REFERENCE = '''\
def blocks(n, n_ranks):
    sizes = [n // n_ranks + (r < n % n_ranks) for r in range(n_ranks)]
    starts = [sum(sizes[:r]) for r in range(n_ranks)]
    return [(s, s + k) for s, k in zip(starts, sizes)]


def matmul(x, w):
    return [[sum(a * b for a, b in zip(row, col)) for col in zip(*w)] for row in x]


def all_reduce(parts):
    return [[sum(p[i][j] for p in parts) for j in range(len(parts[0][0]))] for i in range(len(parts[0]))]


def tensor_parallel_matmul(x, w, n_ranks, split):
    if split == "column":
        parts = [matmul(x, [row[lo:hi] for row in w]) for lo, hi in blocks(len(w[0]), n_ranks)]
        result = [sum((p[i] for p in parts), []) for i in range(len(x))]
        return {"partials": parts, "collective": "all-gather", "result": result}
    parts = [matmul([row[lo:hi] for row in x], w[lo:hi]) for lo, hi in blocks(len(w), n_ranks)]
    return {"partials": parts, "collective": "all-reduce", "result": all_reduce(parts)}


def parallel_mlp(x, a, b, n_ranks):
    parts = []
    for lo, hi in blocks(len(a[0]), n_ranks):
        h = matmul(x, [row[lo:hi] for row in a])
        parts.append(matmul([[max(v, 0) for v in row] for row in h], b[lo:hi]))
    return {"partials": parts, "all_reduces": 1, "result": all_reduce(parts)}
'''


def _matmul(x, w):
    return [[sum(a * b for a, b in zip(row, col)) for col in zip(*w)] for row in x]


def _solve(source: str, fn: str, *args):
    scope: dict = {}
    exec(source, scope)  # noqa: S102 (our own reference, not a student's code: it computes the expected values)
    return scope[fn](*args)


X = [[1, -2, 3], [0, 4, -1]]
W = [[2, 0, 1, -1], [1, 3, 0, 2], [-1, 1, 2, 0]]
W7 = [[1, 2, 3, 4, 5, 6, 7], [0, -1, 0, 1, 0, -1, 0], [2, 0, 0, 0, 0, 0, -2]]
A = [[1, -1, 2, 0, 1, -2], [0, 2, -1, 1, 1, 0], [1, 0, 0, -1, 2, 1]]
B = [[1, 0], [0, 1], [1, 1], [-1, 2], [2, 0], [0, -1]]
ROW_HINT = "Row-split partials are each the full shape of the output but only part of each sum: add them (all-reduce)."
MLP_HINT = "relu of a partial sum is not a partial relu: split a by columns, so each rank's relu sees whole values."
assert _solve(REFERENCE, MATMUL, X, W, 2, "row")["result"] == _matmul(X, W)  # the exact product, by construction


def _case(name, fn, *args, hidden=False, hint=""):
    return Case(name, call(fn, *args), _solve(REFERENCE, fn, *args), hidden=hidden, hint=hint)


CASES = (
    _case("4 output columns on 2 ranks, split by columns", MATMUL, X, W, 2, "column"),
    _case("the same product, w split by rows", MATMUL, X, W, 2, "row", hint=ROW_HINT),
    _case("7 columns on 2 ranks: 4 and 3", MATMUL, X, W7, 2, "column"),
    _case("3 rows on 2 ranks: 2 and 1", MATMUL, X, W7, 2, "row", hint=ROW_HINT),
    _case("the MLP pair on 2 ranks: one all-reduce", MLP, X, A, B, 2, hint=MLP_HINT),
    _case("the MLP pair on 4 ranks (6 hidden columns: 2, 2, 1, 1)", MLP, X, A, B, 4, hint=MLP_HINT),
    _case("hidden 1", MATMUL, X, W, 3, "row", hidden=True),
    _case("hidden 2", MATMUL, [[1, 1, 1]], W7, 3, "column", hidden=True),
    _case("hidden 3", MLP, [[2, -1, 1]], A, B, 3, hidden=True),
    _case("hidden 4", MATMUL, X, W, 1, "row", hidden=True),
)

EXERCISE = Exercise(
    id="tp-shards", title="Split a matmul across ranks", prompt=PROMPT, starter=STARTER, reference=REFERENCE,
    cases=CASES, functions=(MATMUL, MLP),
    summary="Column- and row-split matmuls, the collective that makes each exact, and Megatron's MLP pair.")
