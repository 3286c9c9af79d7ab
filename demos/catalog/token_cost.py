"""The token-cost demo: what a million output tokens cost on this server, measured at growing batch sizes.

For each batch size b (1, 2, 4, … up to `max_batch`) the engine's scheduler serves b identical-length requests
together (`run_batch`, continuous batching, all arriving at once) and its run metrics give the output throughput and
each request's median time per output token. A price per hour for the machine (the student's) turns throughput into
dollars per million output tokens: price ÷ (tokens/s × 3,600) × 1,000,000. Emits one `cost_point` per batch size,
then `cost_summary`: interactive (batch 1) against the cheapest batch, and the cheapest batch that meets the
student's time-per-token target.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from inference_core import DEFAULT_MODEL
from inference_core.engine.trace import TraceEvent, event

from ..spec import DemoSpec, ParamSpec
from .runner import Models

TOPICS = ("the moon", "rain", "bread", "music", "rivers", "bees", "glass", "maps")
MAX_BATCHES = (4, 8, 16, 32)


def usd_per_million(tokens_per_s: float, price_per_hour: float) -> float:
    """Dollars per million tokens for a machine rented at `price_per_hour` producing `tokens_per_s`."""
    return price_per_hour / (tokens_per_s * 3600) * 1_000_000 if tokens_per_s > 0 else float("inf")


def batch_sizes(max_batch: int) -> list[int]:
    """1, 2, 4, … up to `max_batch` (a power of two)."""
    sizes = [1]
    while sizes[-1] * 2 <= max_batch:
        sizes.append(sizes[-1] * 2)
    return sizes


@event("cost_point")
class CostPoint(TraceEvent):
    """One batch size served: `batch_size` requests of `new_tokens` each, all at once."""

    batch_size: int
    output_tokens: int
    duration_s: float  # first arrival to last finish
    output_tokens_per_s: float
    tpot_median_s: float  # each request's time per output token after its first, median over requests
    ttft_median_s: float
    usd_per_million: float  # at the run's price_per_hour
    price_per_hour: float


@event("cost_summary")
class CostSummary(TraceEvent):
    """Interactive against offline: batch 1 beside the cheapest batch, and the cheapest that meets the target."""

    price_per_hour: float
    target_tpot_s: float
    interactive_usd_per_million: float  # batch 1
    cheapest_batch: int
    cheapest_usd_per_million: float
    within_target_batch: int | None  # the cheapest batch whose median time per token meets the target, if any
    within_target_usd_per_million: float | None


def run(params: dict, should_stop: Callable[[], bool] | None = None, *, models: Models) -> Iterator[dict]:
    from inference_core import Request, SamplingParams, SchedulerConfig, run_batch

    params = SPEC.with_defaults(params)
    engine = models.get(params.get("model", DEFAULT_MODEL))
    price, tokens, target = float(params["price_per_hour"]), int(params["new_tokens"]), params["target_tpot_ms"] / 1000
    points = []
    for b in batch_sizes(int(params["max_batch"])):
        reqs = [Request(f"b{b}-r{i}", engine.tokenizer.encode(f"A short note about {TOPICS[i % len(TOPICS)]}:"),
                        SamplingParams(max_new_tokens=tokens, stop_at_eos=False)) for i in range(b)]
        config = SchedulerConfig(mode="continuous", block_size=16, num_blocks=max(64, 4 * b), max_num_seqs=b)
        metrics = {}
        for ev in run_batch(engine, reqs, config, should_stop=should_stop, trace=False):
            if ev.type == "batch_run_finished":
                metrics = ev.metrics
        if should_stop is not None and should_stop() or not metrics.get("completed"):
            return
        rate = metrics["output_throughput"]
        point = CostPoint(batch_size=b, output_tokens=metrics["total_output_tokens"], duration_s=metrics["duration_s"],
                          output_tokens_per_s=rate, tpot_median_s=metrics["median_tpot_ms"] / 1000,
                          ttft_median_s=metrics["median_ttft_ms"] / 1000, usd_per_million=usd_per_million(rate, price),
                          price_per_hour=price)
        points.append(point)
        yield point.to_dict()
    cheapest = min(points, key=lambda p: p.usd_per_million)
    within = [p for p in points if p.tpot_median_s <= target]
    best_within = min(within, key=lambda p: p.usd_per_million) if within else None
    yield CostSummary(price_per_hour=price, target_tpot_s=target, interactive_usd_per_million=points[0].usd_per_million,
                      cheapest_batch=cheapest.batch_size, cheapest_usd_per_million=cheapest.usd_per_million,
                      within_target_batch=best_within.batch_size if best_within else None,
                      within_target_usd_per_million=best_within.usd_per_million if best_within else None).to_dict()


SPEC = DemoSpec(
    name="token-cost",
    title="What a million tokens cost on this server",
    description=(
        "Serve 1, 2, 4, … requests at once on the real engine, measure the output tokens per second and each "
        "request's time per token, and turn them into dollars per million tokens at the price per hour you set."
    ),
    runner=run,
    module="js/demos/token-cost.js",
    measures_time=True,
    params={
        "max_batch": ParamSpec("choice", default=8, label="Largest batch", choices=MAX_BATCHES),
        "new_tokens": ParamSpec("int", default=16, label="Tokens per request", min_value=4, max_value=48),
        "price_per_hour": ParamSpec("float", default=1.0, label="Price of this server per hour ($)", min_value=0.01,
                                    max_value=100.0),
        "target_tpot_ms": ParamSpec("float", default=100.0, label="Target time per token (ms)", min_value=5.0,
                                    max_value=2000.0),
    },
    try_next=(
        "Set “Largest batch” to 32: past some batch size the tokens per second stop growing, and so does the saving.",
        "Lower “Target time per token (ms)” until the largest batch no longer meets it: a chat product pays more per "
        "token than an overnight batch job on the same machine.",
    ),
)
