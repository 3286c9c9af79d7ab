"""Measure this machine's roofline: memory bandwidth (large tensor copy), fp32 matmul FLOP/s, and the batch-1
fp32 decode step of the real model.

Run: .venv/bin/python bench/machine_roofline.py [--no-model] [--json] — prints the medians of repeated runs and
the JSON props the roofline calculator takes (`machine`); `--json` prints the whole profile instead (the format
of serverprofile/recorded.json, the fallback the lessons show until a worker has published its own). The
measuring code is workers/measure.py, the same the demo worker runs when it starts. The machine
is shared, so treat the figures as what it achieved then.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from inference_core.model.config import DEFAULT_MODEL  # noqa: E402
from workers.measure import copy_bandwidth, matmul_flops, measure  # noqa: E402,F401


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=DEFAULT_MODEL, help="the model whose decode step is timed")
    p.add_argument("--no-model", action="store_true", help="bandwidth and matmul only (no model load)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", action="store_true", help="print the whole profile as JSON")
    args = p.parse_args()
    engine = None
    if not args.no_model:
        from inference_core import load_engine

        engine = load_engine(args.model, device=args.device)
    profile = measure(engine, device=args.device)
    if args.json:
        print(json.dumps({**profile, "command": "python " + " ".join(["bench/machine_roofline.py", *sys.argv[1:]])},
                         indent=1))
        return
    bw, fl = profile["bandwidth_gbps"], profile["matmul_gflops"]
    print(f"{profile['device_name']}, threads {torch.get_num_threads()}  copy bandwidth {bw:.2f} GB/s  "
          f"fp32 matmul {fl:.1f} GFLOP/s  ridge point {fl / bw:.1f} FLOP/byte")
    if profile["decode_step_ms"]:
        print(f"{profile['model']} decode step (batch 1, {profile['dtype']}) {profile['decode_step_ms']:.1f} ms = "
              f"{1e3 / profile['decode_step_ms']:.1f} tok/s, {profile['decode_bytes_per_step'] / 1e6:.0f} MB per step "
              f"(roofline {bw * 1e9 / profile['decode_bytes_per_step']:.1f} tok/s)")
    print(json.dumps({"machine": {"label": "This course server (CPU, fp32)", "bandwidth_gbps": bw, "peak_gflops": fl}}))


if __name__ == "__main__":
    main()
