"""Comparisons that hold on a shared worker: two settings timed in alternating repeats within one run.

A demo that compares two settings (cache vs none, batched vs sequential, …) times each side `REPEATS` times,
flipping which side goes first from one repeat to the next (A B, B A, A B), so that a slow spell of the shared
machine lands on both sides instead of one. Each timed run is uninterrupted: it runs to its end inside one step of
the runner, and the worker holds the engine's lock across a step, so no other run's forward pass lands inside a
measurement (other processes on the machine still can: that is the spread). A side reports the median and the
spread of its times: min–max for a few repeats, the interquartile range from `IQR_FROM` samples on (where one
stray slow step would otherwise widen the range); where the two spreads overlap the difference is "within noise". Beside the times, every
side reports deterministic counters (tokens prefilled, forward passes, bytes read) that explain the time and
come out the same in every repeat, so the mechanism is visible even when the clock is not.

Events: a `comparison_sample` per timed run, then one `comparison` (demos/catalog/events.py,
docs/trace-schema/course-demos.md).
"""
from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .events import Comparison, ComparisonSample

REPEATS = 3  # timed runs per side: enough for a median and a spread, short enough for a 2-core worker
IQR_FROM = 8  # samples per side from which the spread is the interquartile range instead of min–max


@dataclass(frozen=True)
class Side:
    label: str
    measure: Callable[[], tuple[float, dict]]  # one uninterrupted run: (seconds, counters)


def interleave(a: Side, b: Side, repeats: int = REPEATS,
               should_stop: Callable[[], bool] | None = None) -> Iterator[ComparisonSample]:
    """A B, B A, A B, …: one sample per timed run (the caller yields each, ending a step of the runner)."""
    for r in range(repeats):
        for side in (a, b) if r % 2 == 0 else (b, a):
            if should_stop is not None and should_stop():
                return
            seconds, counters = side.measure()
            yield ComparisonSample(repeat=r, side=side.label, time_s=seconds, counters=counters)


def summarize(metric: str, labels: tuple[str, str], times: dict[str, list[float]], counters: dict[str, dict],
              claim: str = "", other_sequences: int = 0) -> Comparison:
    """The `comparison` event of two sides' times. `claim` is the side the lesson says is faster ("" for none)."""
    if claim and claim not in labels:
        raise ValueError(f"claim {claim!r} is not one of {labels}")
    repeats = min(len(times[label]) for label in labels)
    iqr = repeats >= IQR_FROM
    sides = []
    for label in labels:
        ts = times[label]
        low, high = spread(ts, iqr)
        sides.append({"label": label, "times_s": ts, "median_s": statistics.median(ts), "low_s": low,
                      "high_s": high, "counters": counters.get(label, {})})
    a, b = sides
    return Comparison(
        metric=metric, repeats=repeats, spread="IQR" if iqr else "min–max", sides=sides, claim=claim,
        faster=a["label"] if a["median_s"] <= b["median_s"] else b["label"],
        within_noise=a["low_s"] <= b["high_s"] and b["low_s"] <= a["high_s"],
        other_sequences=other_sequences, cpu_load_1m=_load_average(),
    )


def spread(times: list[float], iqr: bool) -> tuple[float, float]:
    """(low, high): the 25th and 75th percentiles, or the min and max."""
    if not iqr:
        return min(times), max(times)
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return q1, q3


def from_samples(metric: str, labels: tuple[str, str], samples: list[ComparisonSample], claim: str = "",
                 other_sequences: int = 0) -> Comparison | None:
    """`summarize` over `interleave`'s samples; None when a side has no sample (the run was stopped)."""
    times = {label: [s.time_s for s in samples if s.side == label] for label in labels}
    if not all(times.values()):
        return None
    counters = {s.side: s.counters for s in samples}
    return summarize(metric, labels, times, counters, claim, other_sequences)


def compare(a: Side, b: Side, metric: str, claim: str | Callable[[dict[str, dict]], str] = "",
            other_sequences: int = 0, repeats: int = REPEATS,
            should_stop: Callable[[], bool] | None = None) -> Iterator[dict]:
    """Yield each sample's event, then the `comparison` (none if the run was stopped). `claim` may be a
    function of the sides' counters (label → counters), where what the lesson says depends on them."""
    samples = []
    for sample in interleave(a, b, repeats, should_stop):
        samples.append(sample)
        yield sample.to_dict()
    if should_stop is not None and should_stop():
        return  # a verdict over part of the repeats would not be the comparison the page describes
    if callable(claim):
        claim = claim({s.side: s.counters for s in samples})
    result = from_samples(metric, (a.label, b.label), samples, claim, other_sequences)
    if result is not None:
        yield result.to_dict()


def _load_average() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # not every platform has one
        return -1.0
