"""Continuous vs static batching demo: the same requests (student-chosen lengths and arrival steps) run in
both modes, one after the other; the page draws a Gantt chart per request and the batch occupancy per step.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from ..config import DEFAULT_MODEL


TOPICS = ("the moon", "rain", "bread", "music", "rivers", "bees", "glass", "maps")
DEFAULT_WORKLOAD = "12@0, 3@0, 4@0, 8@1, 3@2, 6@4"


def parse_workload(text: str, max_requests: int = 8, max_tokens: int = 32, max_arrival: int = 40) -> list[tuple[int, int]]:
    """"tokens@arrival_step, ..." → [(max_new_tokens, arrival_step)]. Raises ValueError with a readable message."""
    out = []
    for part in text.replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        tokens, _, arrival = part.partition("@")
        try:
            n, a = int(tokens), int(arrival or 0)
        except ValueError:
            raise ValueError(f"{part!r}: write tokens@arrival_step, e.g. 8@2") from None
        if not 1 <= n <= max_tokens or not 0 <= a <= max_arrival:
            raise ValueError(f"{part!r}: tokens 1–{max_tokens}, arrival step 0–{max_arrival}")
        out.append((n, a))
    if not 1 <= len(out) <= max_requests:
        raise ValueError(f"give 1–{max_requests} requests")
    return out


def run(params: dict, should_stop: Callable[[], bool] | None = None) -> Iterator[dict]:
    from ..engine import load_engine  # here, not at the top: the web process imports check_params only
    from ..llm_engine import run_batch
    from ..sampling import SamplingParams
    from ..scheduler import Request, SchedulerConfig

    engine = load_engine(params.get("model", DEFAULT_MODEL))
    jobs = parse_workload(params.get("workload", DEFAULT_WORKLOAD))
    batch = int(params.get("batch_size", 3))
    modes = ("continuous", "static") if params.get("modes", "both") == "both" else (params["modes"],)
    for mode in modes:
        reqs = [Request(f"r{i}", engine.tokenizer.encode(f"A short note about {TOPICS[i % len(TOPICS)]}:"), SamplingParams(max_new_tokens=n, stop_at_eos=False)) for i, (n, _) in enumerate(jobs)]
        arrivals = {f"r{i}": a for i, (_, a) in enumerate(jobs)}
        config = SchedulerConfig(mode=mode, block_size=16, num_blocks=64, max_num_seqs=batch)
        for ev in run_batch(engine, reqs, config, arrival_steps=arrivals, should_stop=should_stop):
            yield ev.to_dict()
        if should_stop is not None and should_stop():
            return


def check_params(params: dict) -> None:
    """The workload parses (the demos app calls this before queueing a run)."""
    parse_workload(params.get("workload", DEFAULT_WORKLOAD))
