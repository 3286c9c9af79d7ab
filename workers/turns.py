"""First come, first served in front of the engine's lock (issue 38: frame gaps of concurrent direct runs).

Direct runs (those not on the batching service) take the engine's lock for each step. A plain `threading.Lock` is
not fair: when its holder lets go, a thread arriving at that moment (a run back from persisting and publishing its
last event) can take it before the threads already waiting have been scheduled, so a waiting run is passed over
and waits a second round of everyone's steps. Measured with 16 direct runs on 2 cores: 14 of 400 acquisitions were
overtaken (one waited while 29 steps of 15 other runs went by), and those made the tail of the frame gaps. Here the
lock is handed straight to the longest waiter: nobody waits for more than one step of each other run.
"""
from __future__ import annotations

import threading
from collections import deque

_TURNS: dict[int, "Turns"] = {}
_TURNS_GUARD = threading.Lock()


class Turns:
    """A FIFO queue in front of `lock` (a context manager, like the lock)."""

    def __init__(self, lock) -> None:
        self.lock = lock
        self._guard = threading.Lock()
        self._waiting: deque[threading.Event] = deque()
        self._taken = False

    def __enter__(self):
        with self._guard:
            turn = None
            if self._taken:
                turn = threading.Event()
                self._waiting.append(turn)
            self._taken = True
        if turn is not None:
            turn.wait()  # set by the holder's __exit__: the turn is this thread's, nobody can take it meanwhile
        self.lock.acquire()  # others (the engine's own users) may still take the lock itself directly
        return self

    def __exit__(self, *exc) -> None:
        self.lock.release()
        with self._guard:
            if self._waiting:
                self._waiting.popleft().set()  # still taken: handed over
            else:
                self._taken = False

    def waiting(self) -> int:
        with self._guard:
            return len(self._waiting)


def turns(lock) -> Turns:
    """The process's one `Turns` for `lock` (the engine lives as long as the worker process)."""
    with _TURNS_GUARD:
        found = _TURNS.get(id(lock))
        if found is None or found.lock is not lock:
            found = _TURNS[id(lock)] = Turns(lock)
        return found
