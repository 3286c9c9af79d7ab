"""Line diffs between two versions of a module file, numbered on both sides, for the authoring pages.

The work is bounded, whatever the text. `difflib.SequenceMatcher` alone is cubic on repetitive lines (a 4 KB
draft of alternating lines cost minutes per view), so matches are found in steps of known cost:

1. lines equal at both ends are matched outright;
2. lines that occur exactly once in each version anchor the rest (the longest run of them in the same
   order, as patience diff does), and each stretch between two anchors is diffed the same way;
3. a stretch with no such line (repeated lines only) gets an exact longest-common-subsequence table.

Steps 2 and 3 spend a `DiffBudget` (one line comparison is one unit). A stretch the budget cannot pay for is
shown whole, removed then added, and the diff says so; so a page costs at most its budget plus time linear in
its texts. Versions longer than `MAX_DIFF_LINES` are not compared line by line at all.
"""
from __future__ import annotations

import bisect
import difflib
import hashlib
from dataclasses import dataclass

from courseapp.content import lesson_start, serialize_module

MAX_DIFF_LINES = 20_000  # per version; the longest module today has under 200
WORK_UNITS = 1_000_000  # line comparisons one page may spend on exact matching: about 0.3 s of CPU
TOO_LONG = "These versions are too long to compare line by line ({old} and {new} lines; the limit is {limit})."
SHOWN_WHOLE = ("Some changed passages are too repetitive to compare line by line within this page's time limit: "
               "they are shown whole, removed and then added.")


@dataclass(frozen=True)
class DiffRow:
    """One row of a diff. Lines are numbered as the editor numbers them: `old_line`/`new_line` count the
    lesson's lines (1 is the first line after the front matter) and, with `front_matter` set, the front
    matter's lines (1 is the first line after the opening ``---``), shown as "fm 1"."""

    kind: str  # "hunk", "context", "removed", "added", or "notice" (a message about the diff itself)
    text: str
    old_line: int | None = None
    new_line: int | None = None
    front_matter: bool = False

    @property
    def marker(self) -> str:
        return {"removed": "−", "added": "+"}.get(self.kind, "")

    def label(self, line: int | None) -> str:
        if line is None or (self.front_matter and line == 0):  # the opening "---" has no number of its own
            return ""
        return f"fm {line}" if self.front_matter else str(line)


class DiffBudget:
    """The line comparisons left to one page; shared by its diffs (the history page makes one per revision)."""

    def __init__(self, units: int = WORK_UNITS):
        self.left = units

    def spend(self, units: int) -> bool:
        """Take `units` if that many are left (True), else take nothing (False)."""
        if units > self.left:
            return False
        self.left -= units
        return True


def file_text(front_matter: dict, source: str) -> str:
    return serialize_module(front_matter, source)


def content_digest(text: str) -> str:
    """Names one proposed version: a confirmation given for it does not carry over to a later edit."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def diff_rows(old: str, new: str, context: int = 3, budget: DiffBudget | None = None) -> list[DiffRow]:
    """Changed lines with `context` lines around them, numbered in both versions as the editor numbers them
    (see `DiffRow`); [] when equal.

    A "notice" row comes first when the diff is not exact: versions too long to compare (then it is the only
    row), or passages shown whole because `budget` ran out.
    """
    if old == new:
        return []
    a, b = old.splitlines(), new.splitlines()
    if max(len(a), len(b)) > MAX_DIFF_LINES:
        return [DiffRow("notice", TOO_LONG.format(old=len(a), new=len(b), limit=MAX_DIFF_LINES))]
    blocks, exact = matching_blocks(a, b, budget or DiffBudget())
    rows: list[DiffRow] = [] if exact else [DiffRow("notice", SHOWN_WHOLE)]
    old_start, new_start = lesson_start(a), lesson_start(b)

    def row(kind: str, text: str, i: int | None = None, j: int | None = None) -> DiffRow:
        """A row for line index `i` of `a` and/or `j` of `b`, numbered as the editor numbers them."""
        in_front_matter = (i is not None and i < old_start) or (j is not None and j < new_start)
        old_line = None if i is None else (i if i < old_start else i - old_start + 1)
        new_line = None if j is None else (j if j < new_start else j - new_start + 1)
        return DiffRow(kind, text, old_line, new_line, in_front_matter)

    for group in _Matcher(a, b, blocks).get_grouped_opcodes(context):
        lines: list[DiffRow] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [row("context", a[i], i, j1 + k) for k, i in enumerate(range(i1, i2))]
                continue
            lines += [row("removed", a[i], i=i) for i in range(i1, i2)]
            lines += [row("added", b[j], j=j) for j in range(j1, j2)]
        rows.append(DiffRow("hunk", _hunk_title(lines)))
        rows += lines
    return rows


def _span(rows: list[DiffRow], side: str) -> str:
    """The lines a hunk covers on one side, e.g. "fm 2–fm 3, 1–4" or "5–9"."""
    parts = []
    for front_matter in (True, False):
        numbers = [getattr(r, side) for r in rows if r.front_matter == front_matter and r.label(getattr(r, side))]
        if numbers:
            first, last = (f"fm {n}" if front_matter else str(n) for n in (min(numbers), max(numbers)))
            parts.append(first if first == last else f"{first}–{last}")
    return ", ".join(parts) or "none"


def _hunk_title(rows: list[DiffRow]) -> str:
    return f"Lines {_span(rows, 'old_line')} → {_span(rows, 'new_line')}"


def diff_stats(rows: list[DiffRow]) -> tuple[int, int]:
    return sum(r.kind == "added" for r in rows), sum(r.kind == "removed" for r in rows)


def diff_notice(rows: list[DiffRow]) -> str:
    """The message of a diff that is not exact, or ""."""
    return rows[0].text if rows and rows[0].kind == "notice" else ""


# --- Matching ---------------------------------------------------------------------------------------------------


class _Matcher(difflib.SequenceMatcher):
    """difflib's opcodes and hunks, over matching blocks found by `matching_blocks` instead of its own search."""

    def __init__(self, a: list[str], b: list[str], blocks: list[tuple[int, int, int]]):
        super().__init__(None, a, b, autojunk=False)
        self._blocks = blocks

    def get_matching_blocks(self):
        return self._blocks


def matching_blocks(a: list, b: list, budget: DiffBudget) -> tuple[list[tuple[int, int, int]], bool]:
    """difflib-style matching blocks `(i, j, size)`, ascending, ending with `(len(a), len(b), 0)`, and
    whether they are exact (False: some stretch was left unmatched because `budget` ran out)."""
    ids: dict[str, int] = {}
    a = [ids.setdefault(line, len(ids)) for line in a]  # compare small ints, not strings
    b = [ids.setdefault(line, len(ids)) for line in b]
    pairs: list[tuple[int, int, int]] = []
    exact = True
    stack = [(0, len(a), 0, len(b))]
    while stack:
        alo, ahi, blo, bhi = stack.pop()
        while alo < ahi and blo < bhi and a[alo] == b[blo]:
            pairs.append((alo, blo, 1))
            alo, blo = alo + 1, blo + 1
        while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
            pairs.append((ahi - 1, bhi - 1, 1))
            ahi, bhi = ahi - 1, bhi - 1
        if alo == ahi or blo == bhi:
            continue
        if not budget.spend((ahi - alo) + (bhi - blo)):
            exact = False
            continue
        anchors = _unique_anchors(a, b, alo, ahi, blo, bhi)
        if anchors:
            previous_i, previous_j = alo, blo
            for i, j in anchors:
                pairs.append((i, j, 1))
                stack.append((previous_i, i, previous_j, j))
                previous_i, previous_j = i + 1, j + 1
            stack.append((previous_i, ahi, previous_j, bhi))
        elif budget.spend((ahi - alo) * (bhi - blo)):
            pairs += _lcs_pairs(a, b, alo, ahi, blo, bhi)
        else:
            exact = False
    return _merged(pairs, len(a), len(b)), exact


def _unique_anchors(a: list[int], b: list[int], alo: int, ahi: int, blo: int, bhi: int) -> list[tuple[int, int]]:
    """The longest increasing run of (i, j) where a[i] == b[j] and that line occurs once on each side."""
    count_a: dict[int, int] = {}
    for i in range(alo, ahi):
        count_a[a[i]] = count_a.get(a[i], 0) + 1
    count_b: dict[int, int] = {}
    where_b: dict[int, int] = {}
    for j in range(blo, bhi):
        count_b[b[j]] = count_b.get(b[j], 0) + 1
        where_b[b[j]] = j
    candidates = [(i, where_b[a[i]]) for i in range(alo, ahi)
                  if count_a[a[i]] == 1 and count_b.get(a[i]) == 1]
    # Patience sorting: tails[k] is the smallest j ending an increasing run of length k + 1.
    tails: list[int] = []
    tail_index: list[int] = []
    back: list[int] = []
    for index, (_, j) in enumerate(candidates):
        k = bisect.bisect_left(tails, j)
        if k == len(tails):
            tails.append(j)
            tail_index.append(index)
        else:
            tails[k], tail_index[k] = j, index
        back.append(tail_index[k - 1] if k else -1)
    run = []
    index = tail_index[-1] if tail_index else -1
    while index >= 0:
        run.append(candidates[index])
        index = back[index]
    return run[::-1]


def _lcs_pairs(a: list[int], b: list[int], alo: int, ahi: int, blo: int, bhi: int) -> list[tuple[int, int, int]]:
    """An exact longest common subsequence of two stretches, by the classic table (cost: their product)."""
    n, m = ahi - alo, bhi - blo
    table = [[0] * (m + 1) for _ in range(n + 1)]  # table[i][j]: LCS length of a[alo+i:ahi], b[blo+j:bhi]
    for i in range(n - 1, -1, -1):
        line, row, below = a[alo + i], table[i], table[i + 1]
        for j in range(m - 1, -1, -1):
            row[j] = below[j + 1] + 1 if line == b[blo + j] else max(below[j], row[j + 1])
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if a[alo + i] == b[blo + j]:
            pairs.append((alo + i, blo + j, 1))
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def _merged(pairs: list[tuple[int, int, int]], n: int, m: int) -> list[tuple[int, int, int]]:
    """Sorted, with adjacent blocks joined (difflib's invariant), and the (n, m, 0) sentinel."""
    blocks: list[tuple[int, int, int]] = []
    for i, j, size in sorted(pairs):
        if blocks and blocks[-1][0] + blocks[-1][2] == i and blocks[-1][1] + blocks[-1][2] == j:
            blocks[-1] = (blocks[-1][0], blocks[-1][1], blocks[-1][2] + size)
        else:
            blocks.append((i, j, size))
    blocks.append((n, m, 0))
    return blocks
