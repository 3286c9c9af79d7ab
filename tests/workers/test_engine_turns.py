"""Direct runs take the engine's lock in the order they asked (workers/turns.py): a thread that arrives as the lock
is let go never passes the threads already waiting, as it can with a plain lock."""
from __future__ import annotations

import threading
import time

from workers.turns import Turns, turns


def _wait_until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_the_lock_goes_to_the_waiters_in_the_order_they_came_and_no_late_comer_barges_in():
    lock = threading.Lock()
    fair = Turns(lock)
    order: list[str] = []

    def run(name: str) -> None:
        with fair:
            order.append(name)

    fair.__enter__()  # held: everyone else queues
    waiters = []
    for i in range(5):
        t = threading.Thread(target=run, args=(f"w{i}",))
        t.start()
        waiters.append(t)
        _wait_until(lambda n=i: fair.waiting() == n + 1)  # each in the queue before the next one asks
    fair.__exit__(None, None, None)
    run("late")  # asks right as the lock is let go: with a plain lock it could take it first
    for t in waiters:
        t.join(10)
    assert order == ["w0", "w1", "w2", "w3", "w4", "late"]
    assert not lock.locked() and fair.waiting() == 0


def test_a_step_that_raises_still_hands_the_lock_on():
    fair = Turns(threading.Lock())
    try:
        with fair:
            raise StopIteration
    except StopIteration:
        pass
    done = threading.Event()
    threading.Thread(target=lambda: (fair.__enter__(), done.set(), fair.__exit__(None, None, None))).start()
    assert done.wait(5)


def test_one_queue_per_lock():
    a, b = threading.Lock(), threading.Lock()
    assert turns(a) is turns(a)
    assert turns(a) is not turns(b)
