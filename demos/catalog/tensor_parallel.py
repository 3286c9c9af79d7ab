"""The model-parallelism demo: the course model split across 2 processes with `torch.distributed`, decoding the
student's prompt greedily beside the engine in one process, with each rank's compute and communication timed per
step.

`split: tensor` is Megatron-LM's tensor parallelism (attention by key/value group, the MLP by columns; two
all-reduces a layer, `demos/tp_worker.py` says how the 9 heads are dealt); `split: pipeline` gives each process 15 of
the 30 layers (a send of the hidden state and one of the token a step). The ranks run the engine's own
`Transformer` code on weights cut from the loaded engine's, in processes of their own (spawned, joined on a free
localhost port; gloo on the CPU, NCCL where each rank has a GPU), and are stopped whatever ends the run: Stop, an
error, or the run's own end.
"""
from __future__ import annotations

import queue as queue_errors
import socket
import time
from collections.abc import Callable, Iterator

from inference_core import DEFAULT_MODEL
from inference_core.engine.trace import TraceEvent, event

from ..spec import DemoSpec, ParamSpec
from .runner import Models

MAX_PROMPT_TOKENS = 48
SPLITS = ("tensor", "pipeline")
ALL_REDUCES_PER_LAYER = 2  # one after attention's W_o, one after the MLP's W_down: the two row-parallel matmuls
START_TIMEOUT_S = 120.0  # until a rank's first word (ready): spawning, importing torch, joining the group
STEP_TIMEOUT_S = 60.0  # between any two words after that
DEFAULT_PROMPT = "The three primary colors are"


@event("parallel_plan")
class ParallelPlan(TraceEvent):
    """How the model is split, and on what: one entry per rank."""

    split: str  # tensor | pipeline
    world_size: int
    backend: str  # gloo | nccl
    devices: list[str]
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    collectives_per_layer: int  # tensor: all-reduces a layer; pipeline: 0 (two point-to-point sends a step)
    ranks: list[dict]  # tensor: {rank, kv_groups, query_heads, ffn_columns, weights}; pipeline: {rank, layers}
    prompt_tokens: list[str]


@event("parallel_step")
class ParallelStep(TraceEvent):
    """One forward on both ranks (step 0: the prompt's prefill) against the one-process engine's token."""

    step: int
    n_tokens: int  # tokens fed this step: the prompt at step 0, then 1
    token_id: int
    token_text: str
    reference_id: int | None  # the engine's token at this step in one process (None: it had stopped)
    reference_text: str | None
    same: bool
    ranks: list[dict]  # {rank, compute_s, comm_s, collectives, token_id}


@event("parallel_summary")
class ParallelSummary(TraceEvent):
    split: str
    text: str
    reference_text: str
    identical: bool
    n_steps: int
    collectives_per_step: int  # what rank 0 counted at each decode step
    compute_s: list[float]  # per rank, summed over the decode steps (step 0, the prefill, apart)
    comm_s: list[float]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_processes(procs, grace_s: float = 3.0) -> None:
    """Terminate what still runs, kill what ignores it, reap all: no rank outlives its run."""
    procs = [p for p in procs if p.pid is not None]  # started ones only
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + grace_s
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()


def _shards(engine, split: str, split_layer: int) -> tuple[list[dict], list[dict]]:
    from demos import tp_worker

    cfg = engine.config
    if split == "tensor":
        plans = tp_worker.tensor_plan(cfg.n_kv_heads, cfg.n_heads // cfg.n_kv_heads, cfg.head_dim, cfg.dim,
                                      cfg.ffn_dim)
        return plans, [tp_worker.tensor_shards(engine.model, plan) for plan in plans]
    plans = [{"rank": 0, "layers": [0, split_layer]}, {"rank": 1, "layers": [split_layer, cfg.n_layers]}]
    return plans, [tp_worker.pipeline_shards(engine.model, r, split_layer) for r in range(tp_worker.WORLD_SIZE)]


def _messages(q, procs, should_stop) -> Iterator[tuple]:
    """The ranks' reports until both are done; raises if one fails, dies or goes silent; returns on Stop."""
    done, last, heard = set(), time.monotonic(), False
    while len(done) < len(procs):
        if should_stop is not None and should_stop():
            return
        try:
            kind, rank, body = q.get(timeout=0.2)
        except queue_errors.Empty:
            dead = [p for r, p in enumerate(procs) if r not in done and not p.is_alive()]
            if dead:
                raise RuntimeError(f"a rank exited with code {dead[0].exitcode} before finishing")
            silent = time.monotonic() - last
            if silent > (STEP_TIMEOUT_S if heard else START_TIMEOUT_S):
                raise RuntimeError(f"the ranks sent nothing for {silent:.0f} s")
            continue
        last, heard = time.monotonic(), True
        if kind == "error":
            raise RuntimeError(f"rank {rank}: {body['message']}")
        if kind == "done":
            done.add(rank)
        yield kind, rank, body


def run(params: dict, should_stop: Callable[[], bool] | None = None, *, models: Models) -> Iterator[dict]:
    import torch.multiprocessing as mp

    from demos import tp_worker
    from inference_core import GenerationParams

    params = SPEC.with_defaults(params)
    engine = models.get(params.get("model", DEFAULT_MODEL))
    cfg, split, max_new = engine.config, params["split"], int(params["max_new_tokens"])
    ids = engine.encode_prompt(params["prompt"], chat=False)[:MAX_PROMPT_TOKENS]
    split_layer = cfg.n_layers // 2
    plans, shards = _shards(engine, split, split_layer)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=tp_worker.rank_main, daemon=True, name=f"model-parallel-rank-{r}",
                         args=(r, port, split, cfg, shards[r], plans[r] if split == "tensor" else None, split_layer,
                               ids, max_new, q)) for r in range(tp_worker.WORLD_SIZE)]
    try:
        for p in procs:
            p.start()
        del shards
        # The plan first, while the ranks start (seconds: each imports torch and joins the group), from the same
        # device choice the ranks make.
        placed = [tp_worker.device_and_backend(r) for r in range(tp_worker.WORLD_SIZE)]
        yield ParallelPlan(
            split=split, world_size=len(procs), backend=placed[0][1], devices=[str(d) for d, _ in placed],
            n_layers=cfg.n_layers, n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads, ffn_dim=cfg.ffn_dim,
            collectives_per_layer=ALL_REDUCES_PER_LAYER if split == "tensor" else 0, ranks=plans,
            prompt_tokens=[engine.tokenizer.token_text(t) for t in ids]).to_dict()
        # One process, the engine itself, meanwhile: the tokens every rank's must equal.
        reference = engine.generate_ids(ids, GenerationParams(max_new_tokens=max_new, temperature=0.0))
        yield from _stream(engine, split, reference, q, procs, should_stop)
    finally:
        stop_processes(procs)
        q.close()
        q.cancel_join_thread()


def _stream(engine, split, reference, q, procs, should_stop) -> Iterator[dict]:
    text = engine.tokenizer.token_text
    rows: dict[int, dict[int, dict]] = {}
    steps: list[dict] = []
    for kind, rank, body in _messages(q, procs, should_stop):
        if kind == "step":
            both = rows.setdefault(body["step"], {})
            both[rank] = body
            if len(both) < len(procs):
                continue
            s = body["step"]
            token = both[len(procs) - 1]["token_id"]  # the last rank picks it (in a pipeline, only it can)
            ref = reference[s] if s < len(reference) else None
            step = ParallelStep(
                step=s, n_tokens=body["n_tokens"], token_id=token, token_text=text(token), reference_id=ref,
                reference_text=None if ref is None else text(ref), same=token == ref,
                ranks=[{k: (round(v, 6) if isinstance(v, float) else v) for k, v in both[r].items()
                        if k in ("rank", "compute_s", "comm_s", "collectives", "token_id")} for r in sorted(both)],
            ).to_dict()
            steps.append(step)
            yield step
    if len(steps) and all(len(rows[s["step"]]) == len(procs) for s in steps) and not (should_stop and should_stop()):
        yield _summary(engine, split, steps, reference).to_dict()


def _summary(engine, split, steps, reference) -> ParallelSummary:
    decode = [s for s in steps if s["step"] > 0]
    per_rank = range(len(steps[0]["ranks"]))
    tokens = [s["token_id"] for s in steps]
    return ParallelSummary(
        split=split, text=engine.tokenizer.decode(tokens), reference_text=engine.tokenizer.decode(reference),
        identical=tokens == list(reference), n_steps=len(steps),
        collectives_per_step=decode[0]["ranks"][0]["collectives"] if decode else 0,
        compute_s=[round(sum(s["ranks"][r]["compute_s"] for s in decode), 6) for r in per_rank],
        comm_s=[round(sum(s["ranks"][r]["comm_s"] for s in decode), 6) for r in per_rank])


SPEC = DemoSpec(
    name="tensor-parallel",
    title="Splitting the model across two processes",
    description=(
        "Run the course model split across two processes that talk through torch.distributed: by attention heads "
        "and MLP columns (tensor parallel, two all-reduces a layer) or by layers (pipeline), and see each rank's "
        "compute beside its communication at every decode step, with the tokens beside one process's."
    ),
    runner=run,
    measures_time=True,
    module="js/demos/tensor-parallel.js",
    params={
        "prompt": ParamSpec("str", default=DEFAULT_PROMPT, label="Prompt", max_chars=400,
                            max_tokens=MAX_PROMPT_TOKENS),
        "max_new_tokens": ParamSpec("int", default=12, label="New tokens", min_value=1, max_value=32),
        "split": ParamSpec("choice", default="tensor", label="Split", choices=SPLITS),
    },
    presets=(
        {"label": "Primary colors", "prompt": DEFAULT_PROMPT},
        {"label": "A list to continue", "prompt": "Monday, Tuesday, Wednesday,"},
    ),
    try_next=(
        "Set “Split” to pipeline and run again: each step now sends the hidden state once and the token back, "
        "instead of 60 all-reduces, but one process waits while the other works.",
        "Raise “New tokens” to 32: the all-reduce time per step stays about the same while the tokens accumulate, "
        "because each one moves only 576 numbers, whatever the context.",
    ),
)
