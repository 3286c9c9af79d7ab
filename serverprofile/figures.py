"""This server's figures in lessons and calculators, read live from the newest `MachineProfile`.

A lesson writes `{{ server.NAME }}` where a figure of this server belongs (NAMES below), in its text or as a
whole JSON string value of a calculator's props (`"machine": "{{ server.machine }}"` gives the roofline
calculator this server's row). The stored lesson HTML keeps the placeholders; `fill` replaces them when a
page is served, from the newest profile a demo worker published (workers/machine_profile.py), or, before any
worker has, from the recorded fallback (`recorded.json`, made by `bench/machine_roofline.py --json`), which
`provenance` then labels with its command, date and device. Narration speaks the recorded figures (`spoken`):
its audio is synthesized once, not per request.
"""
from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path

from django.db import DatabaseError
from django.utils.html import escape

RECORDED_PATH = Path(__file__).with_name("recorded.json")
PLACEHOLDER_RE = re.compile(r"\{\{\s*server\.([A-Za-z0-9_]*)\s*\}\}")
PROPS_RE = re.compile(r'data-props="([^"]*)"')

NAMES = {
    "bandwidth_gbps": "memory bandwidth, GB/s (a 256 MiB copy: bytes read + written per second)",
    "matmul_gflops": "fp32 matrix multiply, GFLOP/s (1024 × 1024 × 1024)",
    "ridge_flops_per_byte": "the ridge point: matmul FLOP/s ÷ bandwidth",
    "decode_step_ms": "one batch-1 decode step of the real model, ms",
    "decode_tokens_per_s": "the same as tokens per second",
    "decode_mb_per_step": "MB the engine counts one decode step reading (weights + KV cache)",
    "decode_achieved_gbps": "what that step achieved: its bytes ÷ its time, GB/s",
    "device": "the processor and its threads",
    "dtype": "the precision the decode step ran in",
    "model": "the model whose decode step was timed",
    "measured": "when (UTC)",
    "spread": "how much the idle measurements behind the live figures varied (largest − smallest), and how many",
    "provenance": "where the figures come from: live (measured while the worker was idle: how often, the spread, the "
                  "date) or the recorded fallback's command, date, device",
    "machine": "the roofline calculator's row for this server (a JSON object in props; its label in text)",
}


def _num(x: float | None, digits: int) -> str:
    return "n/a" if x is None else f"{x:,.{digits}f}"


@dataclass(frozen=True)
class ServerFigures:
    bandwidth_gbps: float
    matmul_gflops: float
    decode_step_ms: float | None
    decode_bytes_per_step: int | None
    device: str
    device_name: str
    threads: int
    dtype: str
    model: str
    engine_version: str
    torch_version: str
    measured_at: datetime
    live: bool  # published by this server's worker; False: the recorded fallback
    command: str = ""  # how the recorded fallback was measured
    # The live figures are medians of `repeats` idle measurements; a spread is their largest minus smallest.
    repeats: int = 1
    bandwidth_spread_gbps: float = 0.0
    matmul_spread_gflops: float = 0.0
    decode_step_spread_ms: float | None = None

    @property
    def ridge_flops_per_byte(self) -> float:
        return self.matmul_gflops / self.bandwidth_gbps

    @property
    def decode_tokens_per_s(self) -> float | None:
        return 1e3 / self.decode_step_ms if self.decode_step_ms else None

    @property
    def decode_achieved_gbps(self) -> float | None:
        if not (self.decode_bytes_per_step and self.decode_step_ms):
            return None
        return self.decode_bytes_per_step / (self.decode_step_ms * 1e-3) / 1e9

    @property
    def device_text(self) -> str:
        if self.device.startswith("cpu"):
            return f"{self.device_name} CPU, {self.threads} threads"
        return f"{self.device_name} ({self.device})"

    @property
    def when(self) -> str:
        return f"{self.measured_at:%Y-%m-%d %H:%M} UTC"

    # A measured figure in a sentence carries its spread as ± half of it (of several idle measurements only).
    SPREADS = {"bandwidth_gbps": "bandwidth_spread_gbps", "matmul_gflops": "matmul_spread_gflops",
               "decode_step_ms": "decode_step_spread_ms"}

    @property
    def spread(self) -> str:
        if self.repeats <= 1:
            return "a single measurement"
        step = (f", decode step {_num(self.decode_step_spread_ms, 2)} ms"
                if self.decode_step_spread_ms is not None else "")
        return (f"across {self.repeats} idle measurements: bandwidth {_num(self.bandwidth_spread_gbps, 1)} GB/s, "
                f"matmul {_num(self.matmul_spread_gflops, 0)} GFLOP/s{step} (largest − smallest)")

    def provenance(self, as_html: bool = False, spoken: bool = False) -> str:
        """Where the figures come from. `spoken`: the short form narration reads (always the recorded one)."""
        code = (lambda s: f"<code>{escape(s)}</code>") if as_html else (lambda s: s)
        text = escape if as_html else (lambda s: s)
        if self.live:
            how = (f"the median of {self.repeats} measurements" if self.repeats > 1 else "one measurement")
            return text(f"{how} by this server's demo worker while it ran nothing, {self.when}, on {self.device_text}, "
                        f"{self.dtype}, torch {self.torch_version}, engine {self.engine_version or 'unknown'}")
        if spoken:
            return f"recorded on {self.measured_at:%-d %B %Y} with {self.command}"
        return (text(f"recorded on {self.when} with ") + code(self.command)
                + text(f" on {self.device_text}, {self.dtype}, torch {self.torch_version}; "
                       "this server's demo worker has not published its own measurement yet"))

    def machine(self) -> dict:
        """The roofline calculator's `machine` prop."""
        note = (f"median of {self.repeats} idle measurements {self.when}" if self.repeats > 1 else
                f"measured {self.when}") if self.live else \
            f"recorded {self.measured_at:%Y-%m-%d} with {self.command}"
        return {"label": f"This server ({self.device_text}, {self.dtype})", "bandwidth_gbps": self.bandwidth_gbps,
                "peak_gflops": self.matmul_gflops, "note": note}

    def value(self, name: str):
        """The JSON value of figure `name` (numbers as numbers)."""
        if name == "machine":
            return self.machine()
        if name == "provenance":
            return self.provenance(as_html=False)
        if name == "device":
            return self.device_text
        if name == "measured":
            return self.when
        if name == "spread":
            return self.spread
        if name == "decode_mb_per_step":
            return self.decode_bytes_per_step / 1e6 if self.decode_bytes_per_step else None
        return getattr(self, name)

    def text(self, name: str, as_html: bool = False, spoken: bool = False) -> str:
        """Figure `name` as it reads in a sentence (HTML-escaped with `as_html`; as narrated with `spoken`)."""
        if name == "provenance":
            return self.provenance(as_html, spoken)
        if name == "machine":
            out = self.machine()["label"]
        else:
            v = self.value(name)
            if isinstance(v, str):
                out = v
            else:
                digits = {"matmul_gflops": 0 if (v or 0) >= 100 else 1, "decode_mb_per_step": 0}.get(name, 1)
                out = _num(v, digits)
                spread = getattr(self, self.SPREADS[name]) if name in self.SPREADS and self.repeats > 1 else None
                if spread is not None and v is not None:
                    out += f" ± {_num(spread / 2, digits + (1 if name == 'decode_step_ms' else 0))}"
        return escape(out) if as_html else out


def _from(data: dict, *, live: bool, command: str = "") -> ServerFigures:
    measured = data["measured_at"]
    if isinstance(measured, str):
        measured = datetime.fromisoformat(measured)
    return ServerFigures(
        bandwidth_gbps=float(data["bandwidth_gbps"]), matmul_gflops=float(data["matmul_gflops"]),
        decode_step_ms=data.get("decode_step_ms"), decode_bytes_per_step=data.get("decode_bytes_per_step"),
        device=data.get("device") or "cpu", device_name=data.get("device_name") or "unknown",
        threads=int(data.get("threads") or 0), dtype=data.get("dtype") or "float32", model=data.get("model") or "",
        engine_version=data.get("engine_version") or "", torch_version=data.get("torch_version") or "",
        measured_at=measured, live=live, command=command, repeats=int(data.get("repeats") or 1),
        bandwidth_spread_gbps=float(data.get("bandwidth_spread_gbps") or 0.0),
        matmul_spread_gflops=float(data.get("matmul_spread_gflops") or 0.0),
        decode_step_spread_ms=data.get("decode_step_spread_ms"))


@lru_cache(maxsize=1)
def recorded() -> ServerFigures:
    """The fallback: a run of `bench/machine_roofline.py --json` on the course server, kept in the repository."""
    data = json.loads(RECORDED_PATH.read_text(encoding="utf-8"))
    return _from(data, live=False, command=data["command"])


def latest_profile():
    from .models import MachineProfile

    try:
        return MachineProfile.objects.order_by("-measured_at", "-pk").first()
    except DatabaseError:  # no table yet (a process started before `migrate`): the fallback
        return None


def current() -> ServerFigures:
    """The newest profile a worker published, else the recorded fallback."""
    row = latest_profile()
    if row is None:
        return recorded()
    return _from({f: getattr(row, f) for f in (
        "bandwidth_gbps", "matmul_gflops", "decode_step_ms", "decode_bytes_per_step", "device", "device_name",
        "threads", "dtype", "model", "engine_version", "torch_version", "measured_at", "repeats",
        "bandwidth_spread_gbps", "matmul_spread_gflops", "decode_step_spread_ms")}, live=True)


def unknown_placeholders(body: str) -> list[tuple[int, str]]:
    """(1-based line, name) of every `{{ server.NAME }}` in `body` whose NAME is not a figure."""
    found, line, counted_to = [], 1, 0
    for m in PLACEHOLDER_RE.finditer(body):
        if m[1] not in NAMES:  # lines counted on from the last one, not from the start: linear in `body`
            line, counted_to = line + body.count("\n", counted_to, m.start()), m.start()
            found.append((line, m[1]))
    return found


def _fill_value(value, figures: ServerFigures):
    if isinstance(value, str):
        m = PLACEHOLDER_RE.fullmatch(value.strip())
        if m and m[1] in NAMES:
            return figures.value(m[1])
        return PLACEHOLDER_RE.sub(lambda m: figures.text(m[1]) if m[1] in NAMES else m[0], value)
    if isinstance(value, dict):
        return {k: _fill_value(v, figures) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_value(v, figures) for v in value]
    return value


def _fill_props(match: re.Match, figures: ServerFigures) -> str:
    raw = html.unescape(match[1])
    if not PLACEHOLDER_RE.search(raw):
        return match[0]
    try:
        props = json.loads(raw)
    except json.JSONDecodeError:
        return match[0]
    return f'data-props="{escape(json.dumps(_fill_value(props, figures), ensure_ascii=False))}"'


def fill(page_html: str, figures: ServerFigures | None = None) -> str:
    """Replace every figure placeholder in rendered lesson HTML (no database query when there is none)."""
    if "{{" not in page_html or not PLACEHOLDER_RE.search(page_html):
        return page_html
    figures = figures or current()
    page_html = PROPS_RE.sub(lambda m: _fill_props(m, figures), page_html)
    return PLACEHOLDER_RE.sub(lambda m: figures.text(m[1], as_html=True) if m[1] in NAMES else m[0], page_html)


def spoken(text: str) -> str:
    """Narration text: placeholders become the recorded figures (audio is made once, not per request)."""
    if "{{" not in text:
        return text
    figures = recorded()
    return PLACEHOLDER_RE.sub(lambda m: figures.text(m[1], spoken=True) if m[1] in NAMES else m[0], text)
