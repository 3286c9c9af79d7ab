"""Dollars per million tokens from measured throughput, and the cheapest batch that still meets a latency target
(the trap: taking the cheapest batch, whose requests each wait longest per token)."""
from __future__ import annotations

from .base import Case, Exercise, call

COST, CHOOSE = "usd_per_million", "cheapest_within_target"

PROMPT = """\
A machine rented at `price_per_hour` dollars that produces `tokens_per_s` output tokens per second:

* Write `usd_per_million(tokens_per_s, price_per_hour)`: what a million of its tokens cost.
* Write `cheapest_within_target(points, price_per_hour, max_tpot_s)`. `points` are measurements at several batch
  sizes, each a dict `{"batch_size", "tokens_per_s", "tpot_s"}` (`tpot_s`: each request's time per output token).
  Return the batch size with the lowest cost per million tokens among those whose `tpot_s` is at most
  `max_tpot_s`, or `None` when none meets it. A larger batch makes more tokens per second but each request waits
  longer between its tokens.
"""

STARTER = '''\
def usd_per_million(tokens_per_s, price_per_hour):
    return price_per_hour / tokens_per_s * 1_000_000


def cheapest_within_target(points, price_per_hour, max_tpot_s):
    best = max(points, key=lambda p: p["tokens_per_s"])
    return best["batch_size"]
'''

REFERENCE = '''\
def usd_per_million(tokens_per_s, price_per_hour):
    return price_per_hour / (tokens_per_s * 3600) * 1_000_000


def cheapest_within_target(points, price_per_hour, max_tpot_s):
    fast_enough = [p for p in points if p["tpot_s"] <= max_tpot_s]
    if not fast_enough:
        return None
    return min(fast_enough, key=lambda p: usd_per_million(p["tokens_per_s"], price_per_hour))["batch_size"]
'''

POINTS = [{"batch_size": 1, "tokens_per_s": 40.0, "tpot_s": 0.025}, {"batch_size": 4, "tokens_per_s": 120.0, "tpot_s": 0.033},
          {"batch_size": 16, "tokens_per_s": 260.0, "tpot_s": 0.061}, {"batch_size": 32, "tokens_per_s": 300.0, "tpot_s": 0.107}]
HOURS = "Tokens per second × 3,600 is tokens per hour: the price per hour divides that."

CASES = (
    Case("40 tokens/s at $2.00 an hour", call(COST, 40.0, 2.0), 13.888888888888888, rel_tol=1e-6, hint=HOURS),
    Case("1,000 tokens/s at $3.60 an hour", call(COST, 1000.0, 3.6), 1.0, rel_tol=1e-6, hint=HOURS),
    Case("a 50 ms target: the cheapest batch that meets it", call(CHOOSE, POINTS, 2.0, 0.05), 4,
         hint="Only batches whose tpot_s is at most the target count; among them take the lowest cost."),
    Case("a 20 ms target: none meets it", call(CHOOSE, POINTS, 2.0, 0.02), None),
    Case("hidden 1", call(COST, 7.5, 0.9), 33.333333333333336, rel_tol=1e-6, hidden=True),
    Case("hidden 2", call(CHOOSE, POINTS, 1.0, 1.0), 32, hidden=True),
    Case("hidden 3", call(CHOOSE, POINTS, 1.0, 0.025), 1, hidden=True),
    Case("hidden 4", call(CHOOSE, POINTS[:1], 5.0, 0.01), None, hidden=True),
)

EXERCISE = Exercise(
    id="token-cost", title="What a token costs, within a latency target", prompt=PROMPT, starter=STARTER,
    reference=REFERENCE, cases=CASES, functions=(COST, CHOOSE),
    summary="Dollars per million tokens from throughput, and the cheapest batch size that meets a time-per-token target.")
