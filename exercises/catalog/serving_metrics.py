"""Serving metrics from a request log, as vLLM's benchmark defines them: TTFT, TPOT (the trap: dividing the whole
latency by every token) and goodput (requests that met both targets, per second)."""
from __future__ import annotations

from .base import Case, Exercise, call

METRICS, GOODPUT = "request_metrics", "goodput"

PROMPT = """\
A server's log gives each request's **arrival** time and the time each of its output tokens came out (seconds).

**1.** `request_metrics(arrival, token_times)` returns a dict:

* `"ttft"`: time to first token, from arrival to the first token;
* `"e2e"`: end-to-end latency, from arrival to the last token;
* `"tpot"`: time per output token **after the first**: `(e2e − ttft) / (n − 1)` for `n` tokens, `0.0` for one token.
  The first token's wait (queueing and the prefill) is TTFT's, not TPOT's.

**2.** `goodput(requests, ttft_slo, tpot_slo)`: `requests` is a list of `{"arrival": t, "tokens": [...]}`. Goodput
is the number of requests that met **both** targets (`ttft <= ttft_slo` and `tpot <= tpot_slo`) per second of the
run, the run lasting from the first arrival to the last token of any request. Throughput counts every request;
goodput only those a user would call served.
"""

STARTER = '''\
def request_metrics(arrival, token_times):
    """TTFT, TPOT and end-to-end latency of one request, in seconds."""
    ttft = token_times[0] - arrival
    e2e = token_times[-1] - arrival
    tpot = e2e / len(token_times)  # the time per token?
    return {"ttft": ttft, "tpot": tpot, "e2e": e2e}


def goodput(requests, ttft_slo, tpot_slo):
    """Requests per second that met both latency targets."""
    start = min(r["arrival"] for r in requests)
    end = max(r["tokens"][-1] for r in requests)
    return len(requests) / (end - start)
'''

REFERENCE = '''\
def request_metrics(arrival, token_times):
    ttft = token_times[0] - arrival
    e2e = token_times[-1] - arrival
    n = len(token_times)
    tpot = (e2e - ttft) / (n - 1) if n > 1 else 0.0
    return {"ttft": ttft, "tpot": tpot, "e2e": e2e}


def goodput(requests, ttft_slo, tpot_slo):
    start = min(r["arrival"] for r in requests)
    end = max(r["tokens"][-1] for r in requests)
    good = 0
    for r in requests:
        m = request_metrics(r["arrival"], r["tokens"])
        if m["ttft"] <= ttft_slo and m["tpot"] <= tpot_slo:
            good += 1
    return good / (end - start)
'''


def metrics(arrival: float, tokens: list[float]) -> dict:
    ttft, e2e = tokens[0] - arrival, tokens[-1] - arrival
    return {"ttft": ttft, "tpot": (e2e - ttft) / (len(tokens) - 1) if len(tokens) > 1 else 0.0, "e2e": e2e}


def served_per_s(requests: list[dict], ttft_slo: float, tpot_slo: float) -> float:
    start, end = min(r["arrival"] for r in requests), max(r["tokens"][-1] for r in requests)
    good = [m for m in (metrics(r["arrival"], r["tokens"]) for r in requests)
            if m["ttft"] <= ttft_slo and m["tpot"] <= tpot_slo]
    return len(good) / (end - start)


def steady(arrival: float, first: float, gap: float, n: int) -> list[float]:
    return [round(arrival + first + i * gap, 6) for i in range(n)]


REL = 1e-9
TPOT_HINT = "TPOT leaves the first token out: (e2e − ttft) / (n − 1)."
LOG = [  # a long prompt that queued, two quick ones, one slow decode
    {"arrival": 0.0, "tokens": steady(0.0, 0.25, 0.04, 11)},
    {"arrival": 0.1, "tokens": steady(0.1, 1.5, 0.03, 6)},
    {"arrival": 0.2, "tokens": steady(0.2, 0.2, 0.12, 9)},
    {"arrival": 0.3, "tokens": [0.6]},
]
BURST = [{"arrival": 0.05 * i, "tokens": steady(0.05 * i, 0.1 + 0.08 * i, 0.015 + 0.01 * i, 4 + i)} for i in range(8)]


def _metrics_case(name: str, arrival: float, tokens: list[float], **extra) -> Case:
    return Case(name, call(METRICS, arrival, tokens), metrics(arrival, tokens), rel_tol=REL, **extra)


def _goodput_case(name: str, requests: list[dict], ttft_slo: float, tpot_slo: float, **extra) -> Case:
    return Case(name, call(GOODPUT, requests, ttft_slo, tpot_slo), served_per_s(requests, ttft_slo, tpot_slo),
                rel_tol=REL, **extra)


CASES = (
    _metrics_case("11 tokens: 250 ms to the first, then one every 40 ms", 0.0, LOG[0]["tokens"], hint=TPOT_HINT),
    _metrics_case("one token only: TPOT is 0", 2.0, [2.35]),
    _goodput_case("TTFT ≤ 0.5 s and TPOT ≤ 0.05 s: 2 of 4 requests in 1.75 s", LOG, 0.5, 0.05,
                  hint="Count only the requests that met both targets; the run lasts from the first arrival to "
                       "the last token."),
    _goodput_case("loose targets: every request counts", LOG, 10.0, 1.0),
    _metrics_case("hidden 1", 1.0, steady(1.0, 0.8, 0.05, 3), hidden=True),
    _metrics_case("hidden 2", 0.5, steady(0.5, 0.1, 0.5, 2), hidden=True),
    _goodput_case("hidden 3", BURST, 0.4, 0.05, hidden=True),
    _goodput_case("hidden 4", BURST, 0.2, 0.1, hidden=True),
    _goodput_case("hidden 5", LOG, 0.35, 0.2, hidden=True),
    _goodput_case("hidden 6", BURST, 0.01, 0.01, hidden=True),
)

EXERCISE = Exercise(
    id="serving-metrics", title="TTFT, TPOT and goodput from a request log", prompt=PROMPT, starter=STARTER,
    reference=REFERENCE, cases=CASES, functions=(METRICS, GOODPUT),
    summary="A server's latency figures from its timestamps: time to first token, time per output token, goodput.")
