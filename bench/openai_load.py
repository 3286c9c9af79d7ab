#!/usr/bin/env python3
"""Load generator for the OpenAI-compatible API (docs/openai-api.md): streamed chat completions arriving at a chosen
rate (Poisson arrivals, or evenly spaced with --uniform) against a running stack (`make run`), through OpenAI's own
client, and the serving metrics of the "Serving and its metrics" module:

    .venv/bin/python bench/openai_load.py --url http://127.0.0.1:8000 --key il-… --rate 2 --requests 60 \\
        [--keys-file keys.txt] [--max-tokens 64] [--slo-ttft-ms 2000] [--slo-tpot-ms 200] [--json]

Per request: TTFT (send → first text), TPOT ((last − first text) / (tokens − 1)), and every inter-token gap (ITL,
between consecutive text chunks). Reported: their p50/p99, output throughput (tokens/s over the whole run), request
throughput, and goodput: requests per second that finished within the SLO (TTFT ≤ --slo-ttft-ms and TPOT ≤
--slo-tpot-ms), with the share that did. Refusals (429: a person's share, 503: the queue full) are counted by code,
not retried: at a rate past the server's capacity they are part of the answer. One key is one person, held to the
demos' per-person limits (2 in flight): --keys-file (one key a line) spreads requests over several people.

Do not read figures from a loaded machine: run it against a quiet server, and name the machine and the rate beside
any figure. Only loopback targets are allowed.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field

LOOPBACK = ("127.", "localhost", "[::1]", "::1")
PROMPTS = ["What is a KV cache?", "Explain batching in one paragraph.", "Why is decoding memory-bound?",
           "Name three ways to make inference cheaper.", "What does TTFT measure?", "Write a haiku about GPUs."]


@dataclass
class Outcome:
    sent: float
    first: float | None = None
    done: float | None = None
    chunk_times: list[float] = field(default_factory=list)
    tokens: int = 0
    error: str | None = None

    @property
    def ttft(self) -> float | None:
        return self.first - self.sent if self.first is not None else None

    @property
    def tpot(self) -> float | None:
        if self.first is None or self.done is None or self.tokens < 2:
            return None
        return (self.chunk_times[-1] - self.first) / (self.tokens - 1)

    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.chunk_times, self.chunk_times[1:])]


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


async def one_request(client, model: str, prompt: str, max_tokens: int) -> Outcome:
    import openai

    out = Outcome(sent=time.perf_counter())
    try:
        stream = await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0,
            stream=True, stream_options={"include_usage": True})
        async for chunk in stream:
            if chunk.usage is not None:
                out.tokens = chunk.usage.completion_tokens
            if chunk.choices and chunk.choices[0].delta.content:
                now = time.perf_counter()
                out.first = out.first or now
                out.chunk_times.append(now)
        out.done = time.perf_counter()
        if out.tokens == 0:
            out.tokens = len(out.chunk_times)
    except openai.APIStatusError as exc:
        out.error = f"{exc.status_code} {getattr(exc, 'code', None) or ''}".strip()
    except (openai.APIError, asyncio.TimeoutError) as exc:
        out.error = type(exc).__name__
    return out


async def run_load(args) -> tuple[list[Outcome], float]:
    import openai

    keys = [args.key] if args.key else []
    if args.keys_file:
        with open(args.keys_file, encoding="utf-8") as f:
            keys += [line.strip() for line in f if line.strip()]
    if not keys:
        sys.exit("give --key, --keys-file or INFERENCE_LAB_KEY")
    clients = [openai.AsyncOpenAI(base_url=args.url.rstrip("/") + "/v1", api_key=k, max_retries=0,
                                  timeout=args.timeout) for k in keys]
    rng = random.Random(args.seed)
    tasks = []
    start = time.perf_counter()
    for i in range(args.requests):
        tasks.append(asyncio.create_task(one_request(clients[i % len(clients)], args.model,
                                                     f"{PROMPTS[i % len(PROMPTS)]} (request {i})", args.max_tokens)))
        await asyncio.sleep(1.0 / args.rate if args.uniform else rng.expovariate(args.rate))
    outcomes = await asyncio.gather(*tasks)
    wall = time.perf_counter() - start
    for client in clients:
        await client.close()
    return list(outcomes), wall


def report(outcomes: list[Outcome], wall: float, args) -> dict:
    ok = [o for o in outcomes if o.error is None and o.first is not None]
    ttft = [o.ttft for o in ok]
    tpot = [o.tpot for o in ok if o.tpot is not None]
    itl = [g for o in ok for g in o.gaps()]
    good = [o for o in ok if o.ttft * 1000 <= args.slo_ttft_ms and (o.tpot is None or o.tpot * 1000 <= args.slo_tpot_ms)]
    ms = lambda v: round(v * 1000, 1) if v is not None else None  # noqa: E731
    return {
        "rate_rps": args.rate, "arrivals": "uniform" if args.uniform else "poisson", "requests": len(outcomes),
        "completed": len(ok), "refused_or_failed": dict(Counter(o.error for o in outcomes if o.error)),
        "wall_s": round(wall, 2),
        "ttft_ms_p50": ms(pct(ttft, 50)), "ttft_ms_p99": ms(pct(ttft, 99)),
        "tpot_ms_p50": ms(pct(tpot, 50)), "tpot_ms_p99": ms(pct(tpot, 99)),
        "itl_ms_p50": ms(pct(itl, 50)), "itl_ms_p99": ms(pct(itl, 99)),
        "output_tokens_per_s": round(sum(o.tokens for o in ok) / wall, 2) if wall else None,
        "requests_per_s": round(len(ok) / wall, 3) if wall else None,
        "slo": {"ttft_ms": args.slo_ttft_ms, "tpot_ms": args.slo_tpot_ms},
        "goodput_rps": round(len(good) / wall, 3) if wall else None,
        "within_slo": round(len(good) / len(outcomes), 3) if outcomes else None,
        "mean_tokens": round(statistics.mean(o.tokens for o in ok), 1) if ok else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--key", default=os.environ.get("INFERENCE_LAB_KEY"), help="an API key (or INFERENCE_LAB_KEY)")
    p.add_argument("--keys-file", help="API keys, one a line: requests are spread over them (one key, one person)")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--rate", type=float, default=1.0, help="arrivals per second (default 1)")
    p.add_argument("--uniform", action="store_true", help="evenly spaced arrivals instead of Poisson")
    p.add_argument("--requests", type=int, default=30)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--slo-ttft-ms", type=float, default=2000.0)
    p.add_argument("--slo-tpot-ms", type=float, default=200.0)
    p.add_argument("--timeout", type=float, default=300.0, help="per request, seconds")
    p.add_argument("--seed", type=int, default=0, help="the arrival times' seed")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    host = urllib.parse.urlsplit(args.url).hostname or ""
    if not host.startswith(LOOPBACK) and host not in LOOPBACK:
        p.error("only loopback targets are allowed")
    if args.rate <= 0 or args.requests < 1 or args.max_tokens < 1:
        p.error("--rate, --requests and --max-tokens must be positive")
    result = report(*asyncio.run(run_load(args)), args)
    if args.json:
        print(json.dumps(result))
    else:
        for name, value in result.items():
            print(f"{name:22} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
