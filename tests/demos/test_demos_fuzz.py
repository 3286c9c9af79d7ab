"""Random and hostile messages: each gets exactly one error frame and the socket keeps working."""
from __future__ import annotations

import asyncio
import json
import random
import string

import pytest

from demo_helpers import collect, connect, recv, start

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


def rand_scalar(rng: random.Random):
    return rng.choice([
        None, True, False, rng.randint(-2**63, 2**63), rng.random() * 10 ** rng.randint(-5, 30),
        "".join(rng.choice(string.printable + "ü€😀\u0000\ud7ff") for _ in range(rng.randint(0, 40))),
    ])


def rand_json(rng: random.Random, depth=0):
    kind = rng.random()
    if depth > 4 or kind < 0.4:
        return rand_scalar(rng)
    if kind < 0.7:
        return [rand_json(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    return {"".join(rng.choice(string.ascii_letters) for _ in range(rng.randint(1, 8))): rand_json(rng, depth + 1)
            for _ in range(rng.randint(0, 5))}


def hostile_messages(rng: random.Random, n: int):
    for i in range(n):
        shape = i % 6
        if shape == 0:
            yield json.dumps(rand_json(rng))
        elif shape == 1:  # a plausible action with garbage fields
            msg = {"action": rng.choice(["start", "resume", "cancel"])}
            for key in ("demo", "params", "run_id", "after_seq"):
                if rng.random() < 0.7:
                    msg[key] = rand_json(rng)
            if msg.get("demo") == "kv-cache" and isinstance(msg.get("params"), dict):
                msg["params"]["x_garbage"] = 1
            yield json.dumps(msg)
        elif shape == 2:  # kv-cache with wrongly typed params
            params = {k: rand_scalar(rng) for k in ("prompt", "max_new_tokens", "use_cache", "temperature", "seed")
                      if rng.random() < 0.8}
            params["max_new_tokens"] = rng.choice(["12", 12.5, -1, 10**9, None, [], {}, True])
            yield json.dumps({"action": "start", "demo": "kv-cache", "params": params})
        elif shape == 3:  # broken JSON text
            text = json.dumps(rand_json(rng))
            yield text[: max(1, len(text) // 2)] + rng.choice(["{", "[", '"', "\\", ","])
        elif shape == 4:  # non-finite numbers and deep nesting under the size limit
            yield rng.choice(['{"action":"start","demo":"kv-cache","params":{"temperature":NaN}}',
                              '{"action":"start","demo":"kv-cache","params":{"temperature":Infinity}}',
                              "[" * 5000 + "]" * 5000, '{"action":' * 1500 + "1" + "}" * 1500])
        else:
            yield b"".join(bytes([rng.randrange(256)]) for _ in range(rng.randint(1, 64)))


async def test_fuzzed_messages_each_get_one_error_and_the_server_stays_up(demo_stack, settings):
    settings.DEMO_MESSAGE_RATE = 100000.0  # this test is about content, not rate
    rng = random.Random(1234)
    comm = await connect()
    try:
        for msg in hostile_messages(rng, 240):
            if isinstance(msg, bytes):
                await comm.send_to(bytes_data=msg)
            else:
                await comm.send_to(text_data=msg)
            frame = await recv(comm, timeout=60)  # the first prompt check imports the tokenizer
            assert frame["type"] == "error" and frame["code"] and frame["message"], (msg[:200], frame)
            assert await comm.receive_nothing(timeout=0.01), f"more than one reply to {msg[:200]!r}"
        for size in (settings.DEMO_MAX_MESSAGE_BYTES + 1, 1_000_000):
            await comm.send_to(text_data="x" * size)
            assert (await recv(comm))["code"] == "message_too_large"
        # Still up and still serving real runs on the same socket.
        await start(comm, {"prompt": "Hi", "max_new_tokens": 2})
        assert (await collect(comm))[-1]["type"] == "done"
    finally:
        await comm.disconnect()


async def test_a_message_flood_gets_slow_down_and_the_socket_recovers(demo_stack, settings):
    settings.DEMO_MESSAGE_RATE = 5.0
    settings.DEMO_MESSAGE_BURST = 10.0
    comm = await connect()
    try:
        for _ in range(40):
            await comm.send_to(text_data='{"action":"ping"}')
        frames = [await recv(comm) for _ in range(40)]
        kinds = [f["type"] for f in frames]
        assert kinds.count("pong") >= 10 and kinds.count("error") >= 20, kinds
        slow = next(f for f in frames if f["type"] == "error")
        assert slow["code"] == "slow_down" and slow["retry_after"] >= 1
        await asyncio.sleep(1.0)
        await comm.send_to(text_data='{"action":"ping"}')
        assert (await recv(comm))["type"] == "pong"
    finally:
        await comm.disconnect()
