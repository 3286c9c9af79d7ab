"""The format reference's section on labs (/author/reference/), generated from what the server checks: the demos a
lab may use with their metrics and sides (labs/metrics.py), and the limits `parse_lab` applies."""
from __future__ import annotations

import json

from .definition import MAX_CONFIGS, MAX_QUESTIONS, MAX_REPEATS, MIN_CONFIGS, MIN_REPEATS, QUESTION_KINDS
from .metrics import METRICS, SIDES

EXAMPLE = {
    "demo": "quantization", "title": "Two formats, timed by you", "question": "Does int8 decode faster than fp32?",
    "repeats": 3, "metric": "decode_tokens_per_s", "params": {"max_new_tokens": 8},
    "configs": [{"id": "fp32", "label": "fp32", "params": {"format": "int8"}, "side": "fp32"},
                {"id": "int8", "label": "int8", "params": {"format": "int8"}}],
    "questions": [{"id": "speedup", "kind": "ratio", "of": "int8", "over": "fp32", "text": "How many times faster?"},
                  {"id": "why", "kind": "text", "text": "What moved, and why?"}],
}


def lab_reference() -> dict:
    return {
        "demos": [{"name": demo, "sides": SIDES.get(demo, {}),
                   "metrics": [{**m.describe(name), "event": m.event} for name, m in sorted(metrics.items())]}
                  for demo, metrics in sorted(METRICS.items())],
        "configs": f"{MIN_CONFIGS} to {MAX_CONFIGS}", "repeats": f"{MIN_REPEATS} to {MAX_REPEATS}",
        "questions": MAX_QUESTIONS, "kinds": sorted(QUESTION_KINDS),
        "example": f":::{{lab}} int8-speed\n{json.dumps(EXAMPLE, indent=1, ensure_ascii=False)}\n:::",
    }
