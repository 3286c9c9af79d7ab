"""Iteration-level (continuous) batching against static batching: when each request finishes when a scheduler with
a fixed number of sequence slots refills a slot the step after it frees (the trap: waiting for the whole batch)."""
from __future__ import annotations

from .base import Case, Exercise, call

FN = "finish_steps"

PROMPT = """\
A scheduler runs one decode **step** at a time for every sequence in its batch, and has `max_num_seqs` sequence slots.
All requests arrive at once, and are admitted first come, first served. A request admitted at step `s` gets its first
token at step `s` (its prefill) and one more token at every step after, so a request of `n` output tokens admitted
at step `s` finishes at step `s + n − 1`. Steps are numbered from 1.

Write `finish_steps(output_lens, max_num_seqs, continuous=True)`: the step at which each request finishes, in the
order given.

* **Static batching** (`continuous=False`): the first `max_num_seqs` requests form a batch; a finished request keeps
  its slot until the **whole batch** is done, and only then is the next batch admitted, at the next step.
* **Continuous batching** (`continuous=True`): a finished request frees its slot at once, and the next waiting
  request takes it at the **next step** (iteration-level scheduling, as vLLM and our engine do).

With 2 slots and outputs of 5, 1, 1 tokens, static batching finishes them at steps 5, 1, 6; continuous at 5, 1, 2.
"""

STARTER = '''\
def finish_steps(output_lens, max_num_seqs, continuous=True):
    """The step (from 1) at which each request finishes."""
    finish, start = [], 0
    for b in range(0, len(output_lens), max_num_seqs):
        batch = output_lens[b:b + max_num_seqs]
        finish += [start + n for n in batch]
        start += max(batch)  # the next batch waits for the slowest request of this one
    return finish
'''

REFERENCE = '''\
import heapq


def finish_steps(output_lens, max_num_seqs, continuous=True):
    finish = []
    if not continuous:
        start = 0
        for b in range(0, len(output_lens), max_num_seqs):
            batch = output_lens[b:b + max_num_seqs]
            finish += [start + n for n in batch]
            start += max(batch)
        return finish
    free_at = [1] * max_num_seqs  # the step at which each slot can take a request
    for n in output_lens:
        admitted = heapq.heappop(free_at)
        finish.append(admitted + n - 1)
        heapq.heappush(free_at, admitted + n)
    return finish
'''


def scheduled(output_lens: list[int], max_num_seqs: int, continuous: bool = True) -> list[int]:
    """The expected steps, stepping a model of the scheduler one step at a time (the tests also run the engine's own
    Scheduler on each case)."""
    waiting, running, finish, step = list(range(len(output_lens))), {}, [0] * len(output_lens), 0
    while waiting or running:
        step += 1
        if continuous or not running:
            while waiting and len(running) < max_num_seqs:
                running[waiting.pop(0)] = 0
        for i in list(running):
            running[i] += 1
            if running[i] == output_lens[i]:
                finish[i] = step
                if continuous:
                    del running[i]
        if not continuous and all(running[i] >= output_lens[i] for i in running):
            running.clear()
    return finish


def _case(name: str, lens: list[int], slots: int, continuous: bool = True, **extra) -> Case:
    return Case(name, call(FN, lens, slots, continuous=continuous), scheduled(lens, slots, continuous), **extra)


REFILL_HINT = "In continuous batching a slot is refilled the step after its request finishes, not after the batch."
MIXED = [12, 3, 7, 1, 9, 4, 4, 15, 2, 6]
CASES = (
    _case("static: 2 slots, outputs of 5, 1, 1", [5, 1, 1], 2, continuous=False),
    _case("continuous: 2 slots, outputs of 5, 1, 1", [5, 1, 1], 2, hint=REFILL_HINT),
    _case("continuous: 3 slots, ten mixed requests", MIXED, 3, hint=REFILL_HINT),
    _case("static: 3 slots, ten mixed requests", MIXED, 3, continuous=False),
    _case("more slots than requests", [4, 8, 2], 8),
    _case("hidden 1", MIXED, 4, hidden=True),
    _case("hidden 2", [1] * 9, 2, hidden=True),
    _case("hidden 3", [30, 1, 1, 1, 1, 1], 2, hidden=True),
    _case("hidden 4", MIXED[::-1], 5, continuous=False, hidden=True),
    _case("hidden 5", [7, 7, 7, 7], 1, hidden=True),
    _case("hidden 6", [2, 16, 3, 3, 8, 1, 5, 5, 9, 2, 2, 11], 4, hidden=True),
)

EXERCISE = Exercise(
    id="batch-scheduler", title="Continuous batching: when each request finishes", prompt=PROMPT, starter=STARTER,
    reference=REFERENCE, cases=CASES, functions=(FN,),
    summary="Finish steps under static and iteration-level batching with a fixed number of sequence slots.")
