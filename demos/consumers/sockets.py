"""What every run socket of one event loop (one Daphne process) shares: one timer for all their deadlines, and
the socket counts the per-visitor and per-address caps read.

Issue 43: each socket used to run its own watchdog task, waking every second for the socket's whole life and
cancelled only by `disconnect()`. A consumer that Daphne drops without one (it cancels an application that did not
finish within its close timeout) left that task behind, waking forever: 39,350 of them kept an idle Daphne at
64-100% of a core. Here a socket holds at most one entry in one heap; the loop holds one timer handle (no task) for
the earliest entry; an idle socket's entry lies minutes ahead and costs nothing until then. Entries hold their
callback weakly, so an entry can never keep a dead consumer alive, and the consumer removes its entry and its
counts when its application ends, however it ends (protocol.DemoConsumer.__call__).
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import time
import weakref
from collections import Counter
from collections.abc import Callable, Hashable

log = logging.getLogger(__name__)


class Deadlines:
    """One deadline per key, all served by a single `call_later` handle on the loop.

    Deadlines are rounded up to RESOLUTION so that sockets due at nearly the same moment are served by one
    wake-up. Replacing or cancelling a key leaves its old heap entry behind (it is skipped when popped: O(1) per
    change instead of a heap search); the heap is rebuilt when such entries outnumber the live ones.
    """

    RESOLUTION = 0.25

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._heap: list[tuple[float, int, Hashable]] = []
        self._live: dict[Hashable, tuple[float, int, weakref.WeakMethod]] = {}
        self._seq = itertools.count()
        self._handle: asyncio.TimerHandle | None = None
        self._handle_at = math.inf
        self.fired = 0  # callbacks run so far (the tests and the bench read it)
        self.wakeups = 0

    def __len__(self) -> int:
        return len(self._live)

    def heap_size(self) -> int:
        return len(self._heap)

    def armed(self) -> bool:
        """Whether the loop holds a timer handle for these deadlines (none while there are none)."""
        return self._handle is not None

    def set(self, key: Hashable, when: float, callback: Callable[[], None]) -> None:
        """Call `callback` (a bound method, held weakly) once at `when` (time.monotonic()), replacing any
        deadline `key` had."""
        when = math.ceil(when / self.RESOLUTION) * self.RESOLUTION
        seq = next(self._seq)
        self._live[key] = (when, seq, weakref.WeakMethod(callback))
        heapq.heappush(self._heap, (when, seq, key))
        if len(self._heap) > 2 * len(self._live) + 256:
            self._compact()
        self._arm()

    def cancel(self, key: Hashable) -> None:
        if self._live.pop(key, None) is not None and not self._live:
            self._heap.clear()  # nothing left: drop the stale entries and the handle at once
            self._disarm()

    def _compact(self) -> None:
        self._heap = [(when, seq, key) for key, (when, seq, _) in self._live.items()]
        heapq.heapify(self._heap)

    def _disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle, self._handle_at = None, math.inf

    def _arm(self) -> None:
        """The handle fires at the earliest live deadline (an earlier handle is harmless: it finds nothing)."""
        while self._heap and self._is_stale(self._heap[0]):
            heapq.heappop(self._heap)
        if not self._heap:
            self._disarm()
            return
        first = self._heap[0][0]
        if first < self._handle_at:
            self._disarm()
            self._handle = self.loop.call_later(max(0.0, first - time.monotonic()), self._fire)
            self._handle_at = first

    def _is_stale(self, entry: tuple[float, int, Hashable]) -> bool:
        live = self._live.get(entry[2])
        return live is None or live[1] != entry[1]

    def _fire(self) -> None:
        self._handle, self._handle_at = None, math.inf
        self.wakeups += 1
        now = time.monotonic()
        due = []
        while self._heap and self._heap[0][0] <= now + 1e-3:
            entry = heapq.heappop(self._heap)
            if not self._is_stale(entry):
                due.append(self._live.pop(entry[2])[2])
        for ref in due:
            callback = ref()
            if callback is None:
                continue  # its consumer is gone (garbage): nothing to do, and nothing kept it alive
            self.fired += 1
            try:
                callback()
            except Exception:  # noqa: BLE001 - one socket's bug must not stop every other socket's timer
                log.exception("a socket's timer callback failed")
        self._arm()


class SocketHub:
    """The run sockets of one event loop: their deadlines and how many each visitor and address holds."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.deadlines = Deadlines(loop)
        self.by_owner: Counter[str] = Counter()
        self.by_address: Counter[str] = Counter()

    def join(self, owner: str, address: str, per_owner: int, per_address: int) -> str | None:
        """Count a new socket, or say why it is refused: "owner" (its visitor holds `per_owner` sockets here
        already) or "address" (its client address holds `per_address`). A cap of 0 or less is no cap."""
        if 0 < per_owner <= self.by_owner[owner]:
            return "owner"
        if 0 < per_address <= self.by_address[address]:
            return "address"
        self.by_owner[owner] += 1
        self.by_address[address] += 1
        return None

    def leave(self, owner: str, address: str) -> None:
        for counts, key in ((self.by_owner, owner), (self.by_address, address)):
            counts[key] -= 1
            if counts[key] <= 0:
                del counts[key]  # empty when no socket is open: nothing grows with sockets gone

    def is_idle(self) -> bool:
        """No deadline and no socket counted (what a test checks after dropping its sockets)."""
        return not len(self.deadlines) and not self.by_owner and not self.by_address


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SocketHub] = weakref.WeakKeyDictionary()


def hub() -> SocketHub:
    """The running loop's hub (Daphne runs one loop; each test may run its own, and a closed one's hub goes with
    it)."""
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None:
        found = _hubs[loop] = SocketHub(loop)
    return found
