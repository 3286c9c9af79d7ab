#!/usr/bin/env python3
"""What a student's sampler costs a live run (issue 40, "your code inside the engine"): time per generated token
with the engine's own sampler beside the same request with `Request.chooser` asking the exercise's reference
`sample` in a sandbox of its own (exercises/live_run.py), side by side, as a ratio.

    .venv/bin/python bench/live_sampler.py [--rounds 5] [--tokens 32] [--temperature 0.8] [--json out.json]

Each round runs both sides once, alternating which goes first, on the same prompt, parameters and seed; the sandbox
is started once per run, as a live run starts it, and its start is reported apart. Reported: per side the median
(min, max) seconds per token over the rounds, their ratio (student / engine), the median round trip of one answer
from the sandbox, and the CPU model. Run it on a quiet machine: on a shared box other tenants' load makes both
sides noisy. No database, Redis or worker: the engine and the sandbox only (bubblewrap must be installed).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inferencelab.settings")

PROMPT = "Write one sentence about the sea."


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


class TimedSession:
    """A LiveSession whose answers are timed (the round trip the engine waits for at each token)."""

    def __init__(self, session) -> None:
        self.session, self.waits = session, []

    def ask(self, args, where):
        t0 = time.perf_counter()
        try:
            return self.session.ask(args, where)
        finally:
            self.waits.append(time.perf_counter() - t0)


def one_run(engine, params, student: bool) -> tuple[float, float, list[float]]:
    """(seconds per token, sandbox start seconds, answer round trips) of one request."""
    from exercises.catalog import sampler
    from exercises.live_run import StudentSampler
    from exercises.live_session import LiveSession
    from inference_core.engine.llm_engine import generate_one
    from inference_core.engine.request import Request
    from inference_core.engine.trace import TokenStep

    prompt_ids = engine.encode_prompt(PROMPT, True)
    chooser, session, started_s = None, None, 0.0
    if student:
        t0 = time.perf_counter()
        session = TimedSession(LiveSession(sampler.REFERENCE, "sample"))
        started_s = time.perf_counter() - t0
        chooser = StudentSampler(session, engine.tokenizer, engine.lock, params.seed)
    try:
        request = Request("bench", list(prompt_ids), params, generator=params.generator(), chooser=chooser)
        t0 = time.perf_counter()
        with engine.lock:  # the chooser lets go of it while the sandbox answers, as in a live run
            n = sum(isinstance(e, TokenStep) for e in generate_one(engine, request))
        return (time.perf_counter() - t0) / max(n, 1), started_s, session.waits if session else []
    finally:
        if session is not None:
            session.session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args()

    import django

    django.setup()
    from inference_core.engine.loaded_model import GenerationParams, load_engine

    engine = load_engine()
    params = GenerationParams(temperature=args.temperature, top_k=40, top_p=0.95, seed=1,
                              max_new_tokens=args.tokens, stop_at_eos=False, chat=True)
    one_run(engine, params, student=False)  # warm-up: kernels, pools
    one_run(engine, params, student=True)
    engine_s, student_s, starts, waits = [], [], [], []
    for i in range(args.rounds):
        for student in ((False, True) if i % 2 == 0 else (True, False)):
            per_token, started, answered = one_run(engine, params, student)
            (student_s if student else engine_s).append(per_token)
            if student:
                starts.append(started)
                waits += answered
    result = {
        "engine_sampler_s_per_token": {"median": statistics.median(engine_s), "min": min(engine_s),
                                       "max": max(engine_s)},
        "student_sampler_s_per_token": {"median": statistics.median(student_s), "min": min(student_s),
                                        "max": max(student_s)},
        "ratio_student_over_engine": statistics.median(student_s) / statistics.median(engine_s),
        "sandbox_answer_s_median": statistics.median(waits) if waits else None,
        "sandbox_start_s_median": statistics.median(starts),
        "rounds": args.rounds, "tokens": args.tokens, "temperature": args.temperature,
        "device": str(engine.device), "dtype": engine.dtype_name, "cpu": cpu_model(),
        "load_average": os.getloadavg(),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
