"""What a lab can measure in each demo's runs: per demo, its lab metrics (name → label, unit, which event of a
finished run holds it, how to read it, whether higher is better) and its sides.

A side is a second thing one run measures beside the configuration it was started with: the quantization demo
generates in fp32 next to the chosen format (interleaved step by step, so both are timed under the same load), and a
lab's fp32 row reads that half (`"side": "fp32"`). Kept here, keyed by demo name, rather than on each `DemoSpec`: only
labs read them, and a demo without an entry simply cannot be a lab's demo.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from demos.catalog.speculative import PLAIN, SPECULATIVE

DEFAULT_SIDE = ""  # the configuration's own measurement
MB = 1e-6  # bytes are given in MB (10⁶ bytes), as the lessons' prose gives them


@dataclass(frozen=True)
class LabMetric:
    label: str
    unit: str
    event: str  # the trace event type that carries it (docs/trace-schema/)
    read: Callable[[dict, str], float | None]  # (that event, side) → the value, None where the run lacks it
    higher_is_better: bool

    def describe(self, name: str) -> dict:
        return {"name": name, "label": self.label, "unit": self.unit, "higher_is_better": self.higher_is_better}


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _quant(fp32_key: str, quant_key: str, scale: float = 1.0) -> Callable[[dict, str], float | None]:
    def read(event: dict, side: str) -> float | None:
        value = _number(event.get(fp32_key if side == "fp32" else quant_key))
        return value * scale if value is not None else None
    return read


def _speedup(event: dict, side: str) -> float | None:
    """Plain decoding's median time over speculation's, from the run's alternating repeats (`comparison`)."""
    medians = {s.get("label"): _number(s.get("median_s")) for s in event.get("sides") or [] if isinstance(s, dict)}
    plain, spec = medians.get(PLAIN), medians.get(SPECULATIVE)
    return plain / spec if plain and spec else None


def _summary(key: str, scale: float = 1.0, zero_ok: bool = False) -> Callable[[dict, str], float | None]:
    """A figure of the serving-metrics run's summary (seconds given in ms with scale 1000)."""
    def read(event: dict, side: str) -> float | None:
        value = event.get(key)
        if zero_ok and value == 0 and not isinstance(value, bool):
            return 0.0
        value = _number(value)
        return value * scale if value is not None else None
    return read


METRICS: dict[str, dict[str, LabMetric]] = {
    "quantization": {
        "decode_tokens_per_s": LabMetric(
            "decode tokens per second", "tok/s", "quant_summary",
            _quant("fp32_decode_tokens_per_s", "quant_decode_tokens_per_s"), higher_is_better=True),
        "weight_bytes_per_token": LabMetric(
            "weight bytes read per token", "MB", "quant_summary",
            _quant("fp32_matmul_bytes", "quant_matmul_bytes", MB), higher_is_better=False),
    },
    "kv-cache": {
        "tokens_per_s": LabMetric("tokens per second", "tok/s", "run_finished",
                                  lambda event, side: _number(event.get("tokens_per_s")), higher_is_better=True),
        "kv_bytes": LabMetric("KV cache bytes at the end", "MB", "run_finished",
                              lambda event, side: (_number(event.get("kv_bytes")) or 0) * MB or None,
                              higher_is_better=False),
    },
    "speculative": {
        "speedup": LabMetric("speed-up over plain decoding", "×", "comparison", _speedup, higher_is_better=True),
    },
    "serving-metrics": {
        "ttft_p99_ms": LabMetric("TTFT p99", "ms", "serving_metrics_summary", _summary("ttft_p99_s", 1000),
                                 higher_is_better=False),
        "ttft_p50_ms": LabMetric("TTFT p50", "ms", "serving_metrics_summary", _summary("ttft_p50_s", 1000),
                                 higher_is_better=False),
        "throughput_tokens_per_s": LabMetric("throughput", "tok/s", "serving_metrics_summary",
                                             _summary("throughput_tokens_per_s"), higher_is_better=True),
        # No request met the targets is a measurement too (an overloaded server's goodput is 0), not a missing value.
        "goodput_requests_per_s": LabMetric("goodput", "req/s", "serving_metrics_summary",
                                            _summary("goodput_requests_per_s", zero_ok=True), higher_is_better=True),
    },
}

# Per demo, the sides a configuration may read besides its own (DEFAULT_SIDE), with what each one is.
SIDES: dict[str, dict[str, str]] = {
    "quantization": {"fp32": "the fp32 half of each run: every run also generates in fp32, step for step"},
}

def metrics_for(demo: str) -> dict[str, LabMetric]:
    return METRICS.get(demo, {})
