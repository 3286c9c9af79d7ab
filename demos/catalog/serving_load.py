"""The serving-load demo: a small burst of requests against our own engine, measured like a load test.

Requests arrive `spacing_s` apart (wall clock). In "batched" mode the paged scheduler
(`inference_core.engine.scheduler`, continuous batching) runs them together, one forward per step; in "sequential"
mode `engine.generate` serves one request at a time in arrival order, so later arrivals queue. Per request
it reports TTFT (from arrival, queueing included), TPOT and inter-token latencies; at the end throughput,
goodput (requests meeting both SLOs per second) and percentiles.

Then both modes are timed in alternating repeats (`comparison.py`): the time from the first arrival until every
request has its last token, with the counters that explain it beside (forward passes, tokens per forward pass, the
most sequences that shared one). A timed run lets the clock skip the idle gaps between arrivals instead of
sleeping through them (`SkippingClock`): it holds the engine for its whole length, which should be compute only.
"""
from __future__ import annotations


import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from inference_core import DEFAULT_MODEL, TokenStep

from ..spec import DemoSpec, ParamSpec
from .comparison import Side, compare
from .events import LoadRequest, LoadStep, LoadSummary
from .runner import Models


PROMPTS = (
    "The capital of France is",
    "Write one sentence about the ocean:",
    "List three primary colors:",
    "Once upon a time, in a small village by the sea,",
    "The three states of water are",
    "A good name for a friendly robot is",
    "To make a simple tomato sauce, first",
    "The fastest land animal is",
)


@dataclass
class Tracked:
    """One request's timeline, in seconds from the start of the run."""

    rid: int
    prompt: str
    prompt_ids: list[int]
    arrival_s: float
    start_s: float | None = None
    token_s: list[float] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 1]); 0.0 for no values."""
    if not values:
        return 0.0
    vs = sorted(values)
    return vs[min(len(vs) - 1, max(0, round(q * (len(vs) - 1))))]


def request_event(r: Tracked, engine, ttft_slo: float, tpot_slo: float) -> LoadRequest:
    ttft = r.token_s[0] - r.arrival_s
    itl = [b - a for a, b in zip(r.token_s, r.token_s[1:])]
    tpot = (r.token_s[-1] - r.token_s[0]) / (len(r.token_s) - 1) if len(r.token_s) > 1 else 0.0
    return LoadRequest(
        request_id=r.rid, prompt=r.prompt, n_prompt_tokens=len(r.prompt_ids), n_generated=len(r.token_ids),
        arrival_s=r.arrival_s, start_s=r.start_s if r.start_s is not None else r.token_s[0],
        first_token_s=r.token_s[0], end_s=r.token_s[-1], ttft_s=ttft, tpot_s=tpot, itl_s=itl,
        met_slo=ttft <= ttft_slo and tpot <= tpot_slo,
        text=engine.tokenizer.decode(r.token_ids, skip_special=True),
    )


class Clock:
    """Seconds since the run started; `wait_until` sleeps until a request's arrival (the streamed run)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def wait_until(self, t_s: float, should_stop=None) -> None:
        while self.now() < t_s:
            if should_stop is not None and should_stop():
                return
            time.sleep(min(0.05, max(0.0, t_s - self.now())))


class SkippingClock(Clock):
    """The same timeline, but a wait for an arrival moves the clock forward instead of sleeping: nothing runs while
    the engine waits, so the measured time is the one the real clock would give, without holding the engine idle."""

    def __init__(self) -> None:
        super().__init__()
        self.skipped = 0.0

    def now(self) -> float:
        return time.perf_counter() - self.t0 + self.skipped

    def wait_until(self, t_s: float, should_stop=None) -> None:
        self.skipped += max(0.0, t_s - self.now())


def _sequential(engine, reqs: list[Tracked], max_new: int, clock: Clock, should_stop, slots: int = 1) -> Iterator[tuple]:
    from inference_core import GenerationParams

    gen = GenerationParams(max_new_tokens=max_new, temperature=0.0, stop_at_eos=False)
    total = 0
    for i, r in enumerate(reqs):
        clock.wait_until(r.arrival_s, should_stop)
        r.start_s = clock.now()
        for ev in engine.generate_events(r.prompt_ids, gen, should_stop):
            if isinstance(ev, TokenStep):
                now = clock.now()
                r.token_s.append(now)
                r.token_ids.append(ev.token_id)
                total += 1
                waiting = [x.rid for x in reqs[i + 1:] if x.arrival_s <= now]
                done = [x.rid for x in reqs[:i]] + ([r.rid] if len(r.token_ids) >= max_new else [])
                yield "step", LoadStep(t_s=now, n_running=1, n_waiting=len(waiting), tokens_total=total,
                                       running_ids=[r.rid], waiting_ids=waiting, finished_ids=done)
        if should_stop is not None and should_stop():
            return
        yield "done", r


def _batched(engine, reqs: list[Tracked], max_new: int, clock: Clock, should_stop, slots: int = 32) -> Iterator[tuple]:
    """Continuous batching with `slots` sequences per forward at most: more arrivals than slots wait in the queue."""
    from inference_core import LLMEngine, Request, SamplingParams, SchedulerConfig

    blocks = len(reqs) * (-(-(max(len(r.prompt_ids) for r in reqs) + max_new) // 16)) + 8
    config = SchedulerConfig(mode="continuous", block_size=16, num_blocks=blocks, max_num_seqs=slots)
    llm = LLMEngine(engine, config, trace=False)
    sched = llm.scheduler
    by_id: dict[str, Tracked] = {}
    pending = list(reqs)
    total = 0
    while pending or sched.has_work():
        if should_stop is not None and should_stop():
            return
        now = clock.now()
        while pending and pending[0].arrival_s <= now:
            r = pending.pop(0)
            by_id[str(r.rid)] = r
            params = SamplingParams(max_new_tokens=max_new, stop_at_eos=False)
            sched.add_request(Request(str(r.rid), r.prompt_ids, params))
        if not sched.has_work():
            clock.wait_until(pending[0].arrival_s, should_stop)
            continue
        started = {rid for rid, r in by_id.items() if r.start_s is None}
        t_step = clock.now()
        llm.step()
        now = clock.now()
        for rid in started:
            if sched.requests[rid].output_ids:
                by_id[rid].start_s = t_step
        served = []
        for rid, r in by_id.items():
            req = sched.requests[rid]
            if len(r.token_ids) < len(req.output_ids):
                served.append(r.rid)
            while len(r.token_ids) < len(req.output_ids):  # tokens produced by this step
                r.token_ids.append(req.output_ids[len(r.token_ids)])
                r.token_s.append(now)
                total += 1
        # The queues as the scheduler holds them after this forward (requests not yet arrived are in none).
        yield "step", LoadStep(t_s=now, n_running=len(sched.running), n_waiting=len(sched.waiting) + len(pending),
                               tokens_total=total, running_ids=served,
                               waiting_ids=[int(r.request_id) for r in sched.waiting],
                               finished_ids=[r.rid for rid, r in by_id.items() if sched.requests[rid].status == "finished"])
        for rid, r in by_id.items():
            if sched.requests[rid].status == "finished" and not getattr(r, "_reported", False):
                r._reported = True  # type: ignore[attr-defined]
                yield "done", r


BATCHED, SEQUENTIAL = "batched", "sequential"
RUNNERS = {BATCHED: _batched, SEQUENTIAL: _sequential}


def _tracked(engine, params: dict) -> list[Tracked]:
    """The run's requests: the student's prompt first (if any), then the course's, `spacing_s` apart."""
    first = params.get("prompt")
    prompts = ([first] if first else []) + [p for p in PROMPTS if p != first]
    n, spacing = int(params["n_requests"]), float(params["spacing_s"])
    return [Tracked(i, prompts[i % len(prompts)], engine.encode_prompt(prompts[i % len(prompts)], chat=False),
                    arrival_s=i * spacing) for i in range(n)]


def timed_side(engine, params: dict, mode: str) -> tuple[float, dict]:
    """One uninterrupted serve of the requests in `mode`: the time from the first arrival until every request has
    its last token (on a clock that skips the idle gaps between arrivals), and the counters that explain it. In
    one forward pass each sequence in it gains one token, so the tokens of a pass are the sequences that shared it.
    When requests arrive together (spacing 0) the counters are the same in every repeat; spaced arrivals can land
    a step earlier or later as the machine's speed varies."""
    tokens_per_pass, total, end_s = [], 0, 0.0
    for kind, item in RUNNERS[mode](engine, _tracked(engine, params), int(params["max_new_tokens"]),
                                    SkippingClock(), None, slots=int(params["slots"])):
        if kind == "step":
            tokens_per_pass.append(item.tokens_total - total)
            total, end_s = item.tokens_total, item.t_s
    passes = len(tokens_per_pass)
    return end_s, {"forward passes": passes, "tokens per forward pass": round(total / max(passes, 1), 2),
                   "most sequences sharing one forward pass": max(tokens_per_pass, default=0),
                   "tokens generated": total}


def lesson_claim(counters: dict[str, dict]) -> str:
    """The lesson: batching serves overlapping requests in fewer forward passes, each carrying several, so the
    burst is done sooner. Where no two requests overlapped (one request, or arrivals further apart than a request
    takes) batched runs the same passes as sequential: no claim."""
    batched = counters.get(BATCHED, {})
    fewer = batched.get("forward passes", 0) < counters.get(SEQUENTIAL, {}).get("forward passes", 0)
    return BATCHED if fewer and batched.get("most sequences sharing one forward pass", 0) > 1 else ""


def run(params: dict, should_stop: Callable[[], bool] | None = None,
        *, models: Models) -> Iterator[dict]:

    params = SPEC.with_defaults(params)
    engine = models.get(params.get("model", DEFAULT_MODEL))
    max_new = int(params["max_new_tokens"])
    ttft_slo, tpot_slo = float(params["ttft_slo_s"]), float(params["tpot_slo_s"])
    mode = params["mode"]
    note = ("continuous batching: the paged scheduler runs every admitted request in one forward per step"
            if mode == BATCHED else "sequential: engine.generate serves one request at a time; later ones queue")
    finished: list[LoadRequest] = []
    for kind, item in RUNNERS[mode](engine, _tracked(engine, params), max_new, Clock(), should_stop,
                                    slots=int(params["slots"])):
        if kind == "step":
            yield item.to_dict()
        else:
            ev = request_event(item, engine, ttft_slo, tpot_slo)
            finished.append(ev)
            yield ev.to_dict()
    if should_stop is not None and should_stop() or not finished:
        return
    wall = max(r.end_s for r in finished)
    out_tokens = sum(r.n_generated for r in finished)
    itl = [x for r in finished for x in r.itl_s]
    ttfts = [r.ttft_s for r in finished]
    yield LoadSummary(
        mode=mode, note=note, n_requests=len(finished), wall_s=wall, output_tokens=out_tokens,
        throughput_tokens_per_s=out_tokens / wall, requests_per_s=len(finished) / wall,
        goodput_requests_per_s=sum(r.met_slo for r in finished) / wall, ttft_slo_s=ttft_slo, tpot_slo_s=tpot_slo,
        ttft_p50_s=percentile(ttfts, 0.5), ttft_p90_s=percentile(ttfts, 0.9),
        tpot_p50_s=statistics.median(r.tpot_s for r in finished), itl_p50_s=percentile(itl, 0.5),
        itl_p90_s=percentile(itl, 0.9),
    ).to_dict()
    # The streamed run above shares the machine with the worker's other runs and shows one mode; the two modes
    # are compared in alternating repeats, each uninterrupted.
    sides = [Side(m, lambda m=m: timed_side(engine, params, m)) for m in (BATCHED, SEQUENTIAL)]
    yield from compare(*sides, metric="time until every request had its last token", claim=lesson_claim,
                       should_stop=should_stop)


SPEC = DemoSpec(
    name="serving-load",
    title="A small load test against our engine",
    description=(
        "Send a handful of requests to the course engine and measure what a serving benchmark measures: "
        "TTFT, TPOT, inter-token latency, throughput and goodput."
    ),
    runner=run,
    measures_time=True,
    module="js/demos/serving-load.js",
    params={
        # More requests than batch slots: at the defaults a queue forms, and continuous batching drains it.
        "n_requests": ParamSpec("int", default=5, label="Requests", min_value=1, max_value=6),
        "slots": ParamSpec("int", default=2, label="Batch slots (sequences per forward pass)", min_value=1,
                           max_value=6),
        "max_new_tokens": ParamSpec("int", default=6, label="Tokens per request", min_value=2, max_value=24),
        "spacing_s": ParamSpec("float", default=0.0, label="Seconds between arrivals", min_value=0.0,
                               max_value=2.0),
        "mode": ParamSpec("choice", default="batched", label="Scheduling", choices=("batched", "sequential")),
        "ttft_slo_s": ParamSpec("float", default=3.0, label="TTFT target (s)", min_value=0.05, max_value=60.0),
        "tpot_slo_s": ParamSpec("float", default=0.5, label="TPOT target (s)", min_value=0.01, max_value=10.0),
    },
    try_next=(
        "Set “Seconds between arrivals” to 2: each request is done before the next arrives, nothing shares a "
        "forward pass, and the two modes run the same passes.",
        "Tighten the TPOT target to 0.05 s: goodput falls while throughput stays the same.",
    ),
)
