"""The serving-metrics demo: an open-loop load test at the student's arrival rate against the worker's batching
service, measured as a serving benchmark measures a server.

Requests arrive as a Poisson process: the first at 0 s, then exponential gaps of mean 1 / `rate_per_s` (seeded, so a
seed gives the same arrivals), until `duration_s`. Each arrival is sent, when its time comes, to the same
`EngineService` the API and the cached demos use (`workers/serving.py`), from a thread of its own, whatever the
requests before it are doing: that is what makes the load open-loop. Every request's arrival, first token and
finish is streamed as a `serving_request` event with its time; the `serving_metrics_summary` at the end has TTFT,
TPOT, inter-token latency and end-to-end latency percentiles, throughput, and goodput under the student's SLO, all
computed from those same timestamps (`summarize`). Other students' runs share the service: their load is part of
what this run measures, as on any real server.
"""
from __future__ import annotations

import math
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from inference_core import DEFAULT_MODEL
from inference_core.engine.trace import TraceEvent, event

from ..spec import DemoSpec, ParamSpec
from .kv_cache import EventDicts
from .runner import Models
from .serving_load import PROMPTS

MAX_EXPECTED_REQUESTS = 80  # rate × duration: what the worker's 16 slots serve in well under a minute
MAX_REQUESTS = 120  # a Poisson draw can exceed its mean; arrivals past this many are not sent
DRAIN_S = 45.0  # a request unfinished this long after the last arrival is cancelled, so the run always ends


@event("serving_request")
class ServingRequest(TraceEvent):
    """One moment of one request's life: its arrival, its first token, or its last token."""

    request_id: int
    phase: Literal["arrived", "first_token", "finished"]
    t_s: float  # seconds since the run's first arrival
    prompt: str
    n_prompt_tokens: int
    in_flight: int  # requests arrived and not finished, after this moment
    n_finished: int
    token_s: list[float]  # finished: the time of every output token; else empty
    batch_sizes: list[int]  # finished: how many requests shared the forward pass of each token; else empty
    ttft_s: float | None  # first_token and finished: first token − arrival
    tpot_s: float | None  # finished: (last token − first token) / (tokens − 1), 0 for one token
    e2e_s: float | None  # finished: last token − arrival
    met_slo: bool | None  # finished: ttft_s ≤ the TTFT target and tpot_s ≤ the TPOT target


@event("serving_metrics_summary")
class ServingMetricsSummary(TraceEvent):
    rate_per_s: float
    duration_s: float
    slots: int  # sequences the batching service runs in one forward pass at most
    n_requests: int
    n_finished: int
    span_s: float  # first arrival → last token of any finished request
    output_tokens: int
    throughput_tokens_per_s: float
    requests_per_s: float
    n_met_slo: int
    goodput_requests_per_s: float  # n_met_slo / span_s
    ttft_slo_s: float
    tpot_slo_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    ttft_mean_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    itl_p50_s: float
    itl_p99_s: float
    e2e_p50_s: float
    e2e_p99_s: float
    e2e_mean_s: float
    mean_in_flight: float  # Little's law: requests_per_s × e2e_mean_s, the time-average of requests in the system
    max_in_flight: int


@dataclass
class Tracked:
    rid: int
    prompt: str
    prompt_ids: list[int]
    arrival_s: float = 0.0
    token_s: list[float] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)

    def metrics(self, ttft_slo: float, tpot_slo: float) -> dict:
        ttft, e2e = self.token_s[0] - self.arrival_s, self.token_s[-1] - self.arrival_s
        n = len(self.token_s)
        tpot = (e2e - ttft) / (n - 1) if n > 1 else 0.0
        return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "met_slo": ttft <= ttft_slo and tpot <= tpot_slo}


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least a share q of the values at or below it (0.0 for none). With
    20 values p99 is the largest: a tail percentile needs many requests to mean anything."""
    if not values:
        return 0.0
    ranked = sorted(values)
    return ranked[max(0, math.ceil(q * len(ranked) - 1e-9) - 1)]


def arrival_times(rate_per_s: float, duration_s: float, seed: int | None) -> list[float]:
    """A Poisson process: the first request at 0 s, then exponential gaps of mean 1 / rate, until `duration_s`."""
    rng = random.Random(seed)
    times, t = [], 0.0
    while t < duration_s and len(times) < MAX_REQUESTS:
        times.append(t)
        t += rng.expovariate(rate_per_s)
    return times


def summarize(done: list[Tracked], params: dict, n_requests: int, slots: int,
              max_in_flight: int) -> ServingMetricsSummary:
    """The run's figures from its finished requests' timestamps alone."""
    ttft_slo, tpot_slo = float(params["ttft_slo_s"]), float(params["tpot_slo_s"])
    per = [r.metrics(ttft_slo, tpot_slo) for r in done]
    span = max((r.token_s[-1] for r in done), default=0.0)  # the first arrival is at 0 s
    ttft, tpot, e2e = ([m[k] for m in per] for k in ("ttft_s", "tpot_s", "e2e_s"))
    itl = [b - a for r in done for a, b in zip(r.token_s, r.token_s[1:])]
    tokens, met = sum(len(r.token_s) for r in done), sum(m["met_slo"] for m in per)
    rate = (lambda x: x / span if span > 0 else 0.0)
    mean = (lambda xs: sum(xs) / len(xs) if xs else 0.0)
    return ServingMetricsSummary(
        rate_per_s=float(params["rate_per_s"]), duration_s=float(params["duration_s"]), slots=slots,
        n_requests=n_requests, n_finished=len(done), span_s=span, output_tokens=tokens,
        throughput_tokens_per_s=rate(tokens), requests_per_s=rate(len(done)), n_met_slo=met,
        goodput_requests_per_s=rate(met), ttft_slo_s=ttft_slo, tpot_slo_s=tpot_slo,
        ttft_p50_s=percentile(ttft, 0.5), ttft_p99_s=percentile(ttft, 0.99), ttft_mean_s=mean(ttft),
        tpot_p50_s=percentile(tpot, 0.5), tpot_p99_s=percentile(tpot, 0.99),
        itl_p50_s=percentile(itl, 0.5), itl_p99_s=percentile(itl, 0.99),
        e2e_p50_s=percentile(e2e, 0.5), e2e_p99_s=percentile(e2e, 0.99), e2e_mean_s=mean(e2e),
        mean_in_flight=rate(sum(e2e)), max_in_flight=max_in_flight)


def _send(service, r: Tracked, gen, clock: Callable[[], float], stop: threading.Event, inbox: queue.Queue) -> None:
    """One request on the batching service, in its own thread: every token's time, then how it ended."""
    try:
        for ev in service.generate_events(r.prompt_ids, gen, stop.is_set):
            if ev.type == "token":
                inbox.put(("token", r.rid, (clock(), ev.batch_size)))
            elif ev.type == "run_finished":
                inbox.put(("end", r.rid, ev.finish_reason))
    except Exception as exc:  # noqa: BLE001 — the run's thread re-raises it
        inbox.put(("error", r.rid, exc))


def _events(params: dict, engine, service, should_stop) -> Iterator[TraceEvent]:
    from inference_core import GenerationParams  # the worker only: the web loads no torch

    gen = GenerationParams(max_new_tokens=int(params["max_new_tokens"]), temperature=0.0, stop_at_eos=False)
    ttft_slo, tpot_slo = float(params["ttft_slo_s"]), float(params["tpot_slo_s"])
    arrivals = arrival_times(float(params["rate_per_s"]), float(params["duration_s"]), params["seed"])
    reqs = [Tracked(i, PROMPTS[i % len(PROMPTS)], engine.encode_prompt(PROMPTS[i % len(PROMPTS)], chat=False))
            for i in range(len(arrivals))]
    inbox: queue.Queue = queue.Queue()
    stop = threading.Event()
    t0 = time.perf_counter()
    clock = (lambda: time.perf_counter() - t0)
    threads: list[threading.Thread] = []
    done: list[Tracked] = []
    ended, max_in_flight = 0, 0

    def moment(r: Tracked, phase: str, t_s: float, **finished) -> ServingRequest:
        blank = {"token_s": [], "batch_sizes": [], "ttft_s": None, "tpot_s": None, "e2e_s": None, "met_slo": None}
        return ServingRequest(request_id=r.rid, phase=phase, t_s=t_s, prompt=r.prompt,
                              n_prompt_tokens=len(r.prompt_ids), in_flight=len(threads) - ended,
                              n_finished=len(done), **{**blank, **finished})

    try:
        while ended < len(reqs):
            if should_stop is not None and should_stop():
                return
            sent = len(threads)
            if sent < len(reqs) and clock() >= arrivals[sent]:
                r = reqs[sent]
                r.arrival_s = clock()
                th = threading.Thread(target=_send, args=(service, r, gen, clock, stop, inbox), daemon=True,
                                      name=f"serving-metrics-{r.rid}")
                threads.append(th)
                th.start()
                max_in_flight = max(max_in_flight, len(threads) - ended)
                yield moment(r, "arrived", r.arrival_s)
                continue
            if sent == len(reqs) and clock() > arrivals[-1] + DRAIN_S:
                break  # the rest are cancelled below and counted as unfinished
            wait = arrivals[sent] - clock() if sent < len(reqs) else 0.1
            try:
                kind, rid, payload = inbox.get(timeout=min(0.1, max(0.001, wait)))
            except queue.Empty:
                continue
            r = reqs[rid]
            if kind == "error":
                raise payload
            if kind == "token":
                r.token_s.append(payload[0])
                r.batch_sizes.append(payload[1])
                if len(r.token_s) == 1:
                    yield moment(r, "first_token", payload[0], ttft_s=payload[0] - r.arrival_s)
                continue
            ended += 1
            if payload != "cancelled" and r.token_s:
                done.append(r)
                yield moment(r, "finished", r.token_s[-1], token_s=r.token_s, batch_sizes=r.batch_sizes,
                             **r.metrics(ttft_slo, tpot_slo))
        yield summarize(done, params, len(threads), service.config.max_num_seqs, max_in_flight)
    finally:
        stop.set()  # every request still on the service is aborted there, its KV blocks freed
        for th in threads:
            th.join(timeout=2.0)


def run(params: dict, should_stop: Callable[[], bool] | None = None, *, models: Models) -> Iterator[dict]:
    params = SPEC.with_defaults(params)
    name = params.get("model", DEFAULT_MODEL)
    # The service is thread-safe, and this run only waits on it: it must not hold the engine's lock meanwhile.
    return EventDicts(_events(params, models.get(name), models.service(name), should_stop), needs_engine_lock=False)


def check_params(params: dict) -> None:
    expected = float(params["rate_per_s"]) * float(params["duration_s"])
    if expected > MAX_EXPECTED_REQUESTS:
        raise ValueError(f"rate × duration is {expected:g} requests; at most {MAX_EXPECTED_REQUESTS} fit one run: "
                         "lower the rate or the duration")


SPEC = DemoSpec(
    name="serving-metrics",
    title="Load-test the course server",
    description=(
        "Send requests to the course engine at an arrival rate you choose, as a Poisson process, and measure what "
        "a serving benchmark measures: TTFT, inter-token latency and end-to-end latency percentiles, throughput, "
        "and goodput under the latency targets you set."
    ),
    runner=run,
    check=check_params,
    measures_time=True,
    module="js/demos/serving-metrics.js",
    params={
        "rate_per_s": ParamSpec("float", default=2.0, label="Arrival rate (requests per second)", min_value=0.5,
                                max_value=8.0, limits={"max_expected_requests": MAX_EXPECTED_REQUESTS}),
        "duration_s": ParamSpec("float", default=10.0, label="Arrivals for (seconds)", min_value=5.0,
                                max_value=20.0),
        "max_new_tokens": ParamSpec("int", default=8, label="Tokens per request", min_value=2, max_value=16),
        "ttft_slo_s": ParamSpec("float", default=1.0, label="TTFT target (s)", min_value=0.05, max_value=30.0),
        "tpot_slo_s": ParamSpec("float", default=0.3, label="TPOT target (s)", min_value=0.01, max_value=5.0),
        "seed": ParamSpec("int", default=1, label="Seed of the arrivals (empty = fresh each run)", min_value=0,
                          max_value=2**31 - 1, nullable=True),
    },
    presets=(
        {"label": "Light: 1 request a second", "rate_per_s": 1.0, "duration_s": 10.0},
        {"label": "Busy: 4 a second", "rate_per_s": 4.0, "duration_s": 10.0},
        {"label": "Overload: 8 a second", "rate_per_s": 8.0, "duration_s": 10.0},
    ),
    try_next=(
        "Set “Arrival rate” to 1, 4 and 8 with the same seed and compare TTFT's p50 with its p99: see which one "
        "moves first as the rate grows, and whether throughput keeps following the rate.",
        "Tighten the TTFT target to 0.3 s and run again: goodput falls while throughput stays the same.",
    ),
)
