#!/usr/bin/env python3
"""Where a live frame's time goes, from the engine step to the browser (issue 38): an instrumented demo worker and
Daphne, started in place of `make run`'s, time each part of every frame's path while a load runs.

    # Redis as under make run; then, each in its own shell, with the same DATABASE_URL/REDIS_URL as the stack:
    .venv/bin/python bench/frame_path.py worker --out var/frame_path -c 16      # instead of the `gpu` worker
    .venv/bin/python bench/frame_path.py web --out var/frame_path -b 127.0.0.1 -p 8000 inferencelab.asgi:application
    .venv/bin/python bench/load.py --url http://127.0.0.1:8000 --clients 16 --runs 1 --demo paged-attention \\
        --max-new-tokens 8 --sessions
    .venv/bin/python bench/frame_path.py report --out var/frame_path

Worker side, per frame: the run's whole step (`step_total`), the wait for its turn at the engine
(`engine_turn_wait`, and how many other runs' steps went first meanwhile: at most one each when the hand-over is
fair), the engine lock's hold (`engine_lock_hold`), the cancel check's Redis read (`cancel_check`), the event's
database row (`db_insert_event`) and the channel-layer publish (`group_send`). Daphne side: publish time to the
consumer's handler (`publish_to_handler`: Redis, Daphne's event loop) and the handler itself (`handler`: JSON and
the socket send). The client's own arrival times are bench/load.py's (`latency_ms_*`, `frame_gap_s_*`).
Each process writes its samples (seconds) to `<out>.<role>.json` every 2 s. Measure on a quiet machine.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
SAMPLES: dict[str, list[float]] = {}
_GUARD = threading.Lock()


def record(name: str, value: float) -> None:
    with _GUARD:
        SAMPLES.setdefault(name, []).append(value)


def _writer(path: str) -> None:
    while True:
        time.sleep(2)
        with _GUARD:
            text = json.dumps(SAMPLES)
        Path(path).write_text(text)


def timed(name: str, fn):
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            record(name, time.perf_counter() - t0)
    return wrapper


def atimed(name: str, fn):
    async def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            record(name, time.perf_counter() - t0)
    return wrapper


class HoldTimedLock:
    """The engine's lock, timing each hold."""

    def __init__(self, inner) -> None:
        self.inner, self.since = inner, threading.local()

    def acquire(self, *args, **kwargs):
        got = self.inner.acquire(*args, **kwargs)
        self.since.t = time.perf_counter()
        return got

    def release(self) -> None:
        record("engine_lock_hold", time.perf_counter() - self.since.t)
        self.inner.release()

    def locked(self) -> bool:
        return self.inner.locked()

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()


def instrument_worker() -> None:
    from channels_redis.pubsub import RedisPubSubLoopLayer

    import workers.heartbeat as heartbeat
    import workers.run as run
    import workers.turns as turns
    from demos.models import RunEvent

    RunEvent.objects.create = timed("db_insert_event", RunEvent.objects.create)
    heartbeat.CancelCheck.__call__ = timed("cancel_check", heartbeat.CancelCheck.__call__)
    run.RunState.step = timed("step_total", run.RunState.step)
    RedisPubSubLoopLayer.group_send = atimed("group_send", RedisPubSubLoopLayer.group_send)
    get_engine = run.get_engine

    def engine_with_timed_lock():
        engine = get_engine()
        if not isinstance(engine.lock, HoldTimedLock):
            engine.lock = HoldTimedLock(engine.lock)
        return engine

    run.get_engine = engine_with_timed_lock
    served = [0]
    enter = turns.Turns.__enter__

    def turn_enter(self):
        t0, before = time.perf_counter(), served[0]
        result = enter(self)
        served[0] += 1
        record("engine_turn_wait", time.perf_counter() - t0)
        record("engine_turn_others_first", served[0] - 1 - before)
        return result

    turns.Turns.__enter__ = turn_enter


def instrument_web() -> None:
    from demos.consumers import protocol

    handler = atimed("handler", protocol.DemoConsumer.run_event)

    async def run_event(self, message):
        if message.get("ts"):
            record("publish_to_handler", time.time() - message["ts"])
        return await handler(self, message)

    protocol.DemoConsumer.run_event = run_event


def report(out: str) -> None:
    from bench.load_probes import pct

    for role in ("worker", "web"):
        path = Path(f"{out}.{role}.json")
        if not path.exists():
            continue
        for name, values in sorted(json.loads(path.read_text()).items()):
            scale, unit = (1, "") if name == "engine_turn_others_first" else (1000, " ms")
            print(f"{role:6} {name:26} n={len(values):5}  p50 {pct(values, 50) * scale:9.2f}{unit}"
                  f"  p99 {pct(values, 99) * scale:9.2f}{unit}  max {max(values) * scale:9.2f}{unit}"
                  f"  sum {sum(values):8.2f}")


def main() -> None:
    role = sys.argv[1] if len(sys.argv) > 1 else ""
    args = sys.argv[2:]
    out = "var/frame_path"
    if "--out" in args:
        i = args.index("--out")
        out, args = args[i + 1], args[:i] + args[i + 2:]
    if role == "report":
        return report(out)
    if role not in ("worker", "web"):
        sys.exit(__doc__)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inferencelab.settings")
    import django

    django.setup()
    threading.Thread(target=_writer, args=(f"{out}.{role}.json",), daemon=True).start()
    if role == "worker":
        instrument_worker()
        from celery.__main__ import main as celery_main

        sys.argv = ["celery", "-A", "inferencelab", "worker", "-P", "threads", "-Q", "gpu", "-n", "frame-path@%h",
                    "--loglevel", "WARNING", "--without-gossip", "--without-mingle", *args]
        celery_main()
    else:
        instrument_web()
        import runpy

        sys.argv = ["inferencelab.server", *args]
        runpy.run_module("inferencelab.server", run_name="__main__")


if __name__ == "__main__":
    main()
