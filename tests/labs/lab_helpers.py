"""A small quantization lab and made-up runs of it, stored as the demo consumer and worker store real ones (a `Run`
with the cleaned params its `start` stored, and its `quant_summary` `RunEvent`), for the labs tests."""
from __future__ import annotations

import json
from datetime import timedelta

from django.utils import timezone

from demos.models import Run, RunEvent
from labs.definition import parse_lab

BASE = {"prompt": "The capital of France is", "max_new_tokens": 4}
PROPS = {
    "demo": "quantization", "title": "Formats", "question": "What moves?", "repeats": 3,
    "metric": "decode_tokens_per_s", "params": BASE,
    "configs": [
        {"id": "fp32", "label": "fp32", "params": {"format": "int4-g128"}, "side": "fp32"},
        {"id": "int8", "label": "int8", "params": {"format": "int8"}},
        {"id": "int4", "label": "int4-g128", "params": {"format": "int4-g128"}},
    ],
    "questions": [
        {"id": "speedup", "kind": "ratio", "of": "int4", "over": "fp32", "text": "How many times faster?"},
        {"id": "bytes", "kind": "argmin", "metric": "weight_bytes_per_token", "text": "Fewest bytes?"},
        {"id": "why", "kind": "text", "text": "What moved, and why?"},
    ],
}
FP32_BYTES, BYTES = {"int8": 135_000_000, "int4-g128": 72_000_000}, 538_000_000


def lab_props(**changes) -> dict:
    return json.loads(json.dumps({**PROPS, **changes}))


def make_lab(**changes) -> dict:
    return parse_lab("formats", lab_props(**changes), 1, render_inline=lambda text, line: text)


def lab_markdown(name: str = "formats", line_before: str = "Intro.", **changes) -> str:
    return f"{line_before}\n\n:::{{lab}} {name}\n{json.dumps(lab_props(**changes))}\n:::\n"


_clock = [0]


def store_run(owner: str, fmt: str, quant_tps: float, fp32_tps: float = 46.0, *, params: dict | None = None,
              status: str = Run.Status.DONE, replay_of: Run | None = None, user=None, device: str = "cpu",
              engine_version: str = "abc123def456") -> Run:
    """One finished live run of the quantization demo in format `fmt`, newer than every run stored before it."""
    from demos.registry import validate

    _clock[0] += 1
    cleaned = params if params is not None else validate("quantization", {**BASE, "format": fmt})
    run = Run.objects.create(demo="quantization", params=cleaned, status=status, owner=owner, user=user,
                             device=device, dtype="float32", engine_version=engine_version, model="smollm2-135m",
                             replay_of=replay_of)
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(hours=1) + timedelta(seconds=_clock[0]))
    if status == Run.Status.DONE:  # a replay too: were it counted, its numbers would show
        summary = {"type": "quant_summary", "format": fmt, "kernels": [], "fp32_matmul_bytes": BYTES,
                   "quant_matmul_bytes": FP32_BYTES.get(fmt, 70_000_000), "fp32_decode_tokens_per_s": fp32_tps,
                   "quant_decode_tokens_per_s": quant_tps, "n_generated": 4, "first_divergence": -1,
                   "agreement": 1.0, "fp32_text": "", "quant_text": ""}
        RunEvent.objects.create(run=run, seq=0, type="quant_layer", event={"type": "quant_layer"})
        RunEvent.objects.create(run=run, seq=1, type="quant_summary", event=summary)
    return run
