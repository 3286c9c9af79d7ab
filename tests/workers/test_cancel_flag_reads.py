"""The engine asks a run's cancel check before every step, with the engine's lock held: the check reads the cancel
flag from Redis at most every FLAG_CHECK_INTERVAL (workers/heartbeat.py), and a cancel is still seen within it.
Counted on a real redis-server (its own command statistics)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "demos"))
from demo_stack import _wait_port, free_port, redis_server_binary  # noqa: E402

from demos.runstate import cancel_key  # noqa: E402
from workers.heartbeat import CancelCheck  # noqa: E402


@pytest.fixture
def redis_url(tmp_path, settings):
    port = free_port()
    log = tmp_path / "redis.log"
    proc = subprocess.Popen([redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp_path)], stdout=log.open("w"),
                            stderr=subprocess.STDOUT)
    try:
        _wait_port(port, proc, 20, "redis-server", log)
        settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
        yield settings.REDIS_URL
    finally:
        proc.terminate()
        proc.wait(10)


def _commands(client: redis.Redis) -> int:
    """Every command Redis ran for others (a script's own calls included), less this count's own INFO calls."""
    stats = client.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k != "cmdstat_info")


def test_a_burst_of_steps_reads_the_flag_once_and_a_cancel_is_still_seen_within_the_interval(redis_url):
    client = redis.Redis.from_url(redis_url)
    check = CancelCheck("run-1")
    started = time.monotonic()
    assert not check()  # the first step reads the flag (and who watches)
    before = _commands(client)
    answers = [check() for _ in range(500)]  # 500 more engine steps in a burst
    if time.monotonic() - started < CancelCheck.FLAG_CHECK_INTERVAL:  # a loaded machine may take longer
        assert _commands(client) == before  # not one more round trip
    assert not any(answers)
    client.set(cancel_key("run-1"), "user")
    deadline = time.monotonic() + CancelCheck.FLAG_CHECK_INTERVAL + 2.0
    while not check():
        assert time.monotonic() < deadline, "the cancel was never seen"
        time.sleep(0.01)
    assert check.reason == "user"
    assert time.monotonic() - started < deadline


def test_reads_are_spaced_over_a_long_run(redis_url):
    client = redis.Redis.from_url(redis_url)
    check = CancelCheck("run-2")
    before = client.info("commandstats").get("cmdstat_get", {}).get("calls", 0)
    started = time.monotonic()
    calls = 0
    while time.monotonic() - started < 1.0:
        check()
        calls += 1
        time.sleep(0.005)
    reads = client.info("commandstats").get("cmdstat_get", {}).get("calls", 0) - before  # the flag's, and the
    # watch check's script (once a second) reads one key too
    assert calls > 50 and reads <= 1.0 / CancelCheck.FLAG_CHECK_INTERVAL + 3
