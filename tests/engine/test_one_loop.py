"""One generation loop: every token the CLI, the worker's service, the engine API (speculative decoding included:
its draft and verify are phases of the step), the benches' engine API and the course's demo runners generate
comes out of `LLMEngine.step()`, on every device path: the CPU's fused step, the CPU's reference step, and the CUDA path (the
runner's step graphs, batch-1 decode on the bucket-1 graph), forced on the CPU with the runner's flag.

Traced on the code path, not on source text, and with no file exempt:
- every model forward: each entry point that runs the model (`Transformer.forward` and `.hidden_states`, the fused
  CPU step, the step graphs, the runner's `forward_batch` and `forward_sequence`), outermost call only, with its
  tokens, positions and whether a step drove it. A forward outside them is a *stray*; a
  stray is allowed as a one-pass measurement (a timing, an outlier scan, a perplexity window), but no stray may
  continue another: feed the position after one another stray wrote (a cached loop), or the same tokens plus more
  from position 0 (an uncached loop). A second loop of two tokens already does one or the other.
- every token produced: the tokens each step's postprocess appended (a plain request's sampled token, a
  speculative request's accepted guesses and the target's next token); a run's output must be exactly those (a loop whose forwards cannot be seen, a CUDA graph replayed by hand, still fails here).
- no step-graph bucket is built inside a step (on CUDA: no capture inside a timed step).
The last tests plant rogue loops of two tokens in a module of their own and check the guard catches each.
"""
from __future__ import annotations

import json
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from inference_core.engine.llm_engine import LLMEngine
from inference_core.engine.model_runner import ModelRunner
from inference_core.kernels import triton_kernels
from inference_core.kernels.fused_cpu import FusedStep
from inference_core.kernels.paged_graphs import StepGraphs, _Bucket
from inference_core.engine.scheduler import Scheduler
from inference_core.model.transformer import Transformer

ROOT = Path(__file__).resolve().parents[2]
PATHS = ["cpu", "cpu-reference", "cuda-forced"]  # every device path the runner has, the CUDA one forced on the CPU


def flat(x) -> tuple[int, ...]:
    if isinstance(x, torch.Tensor):
        x = x.reshape(-1)[: x.shape[-1]] if x.dim() > 1 else x  # a [1, T] token row: its one row
        return tuple(int(v) for v in x.tolist())
    return tuple(int(v) for v in x)


@dataclass
class Forward:
    entry: str
    tokens: tuple[int, ...]
    positions: tuple[int, ...]
    driver: str | None  # "step" or None (a stray)
    thread: int
    where: str  # the project frames that called it (strays only)

    def continues(self, earlier: "Forward") -> bool:
        """This forward feeds on from `earlier`: the position after one it wrote (a cache kept between them), or
        its tokens again plus at least one more, from position 0 (no cache)."""
        if not self.positions or not earlier.positions:
            return False
        cached = self.positions[0] > 0 and self.positions[0] - 1 in earlier.positions
        from_zero = self.positions == tuple(range(len(self.positions)))
        regrown = (from_zero and earlier.positions == tuple(range(len(earlier.positions)))
                   and len(self.tokens) > len(earlier.tokens) and self.tokens[:len(earlier.tokens)] == earlier.tokens)
        return cached or regrown


class Trace:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.local = threading.local()
        self.forwards: list[Forward] = []
        self.steps = 0
        self.step_tokens: list[int] = []  # what each step's postprocess appended to its requests, in order
        self.built_in_step = 0  # step-graph buckets allocated while a step ran

    @property
    def driver(self) -> str | None:
        return getattr(self.local, "driver", None)

    def record(self, entry: str, tokens, positions) -> None:
        driver = self.driver
        where = "" if driver else " < ".join(
            f"{Path(f.filename).relative_to(ROOT) if ROOT in Path(f.filename).parents else f.filename}:{f.lineno}"
            for f in reversed(traceback.extract_stack()) if Path(f.filename).name != "test_one_loop.py")
        fw = Forward(entry, flat(tokens), flat(positions), driver, threading.get_ident(), where[:400])
        with self.lock:
            self.forwards.append(fw)

    def strays(self) -> list[Forward]:
        return [f for f in self.forwards if f.driver is None]

    def loops(self) -> list[tuple[Forward, Forward]]:
        """(earlier, later) pairs of strays in one thread where the later continues the earlier."""
        strays = self.strays()
        return [(a, b) for i, b in enumerate(strays) for a in strays[:i] if a.thread == b.thread and b.continues(a)]


def tracing(monkeypatch) -> Trace:
    t = Trace()

    def driven(name: str, fn):
        def wrapper(self, *a, **kw):
            outer = t.driver
            t.local.driver = name
            try:
                return fn(self, *a, **kw)
            finally:
                t.local.driver = outer
        return wrapper

    def forward(entry: str, fn, args):
        def wrapper(self, *a, **kw):
            depth = getattr(t.local, "depth", 0)
            if depth == 0:
                t.record(entry, *args(self, *a, **kw))
            t.local.depth = depth + 1
            try:
                return fn(self, *a, **kw)
            finally:
                t.local.depth = depth
        return wrapper

    step, postprocess, allocate = LLMEngine.step, Scheduler.postprocess, _Bucket.allocate.__func__

    def counted_step(self):
        with t.lock:
            t.steps += 1
        return step(self)

    def counted_postprocess(self, batch, outputs, t_start):
        before = [len(r.output_ids) for r in batch.requests]
        events = postprocess(self, batch, outputs, t_start)
        if t.driver == "step":
            with t.lock:
                for r, n in zip(batch.requests, before):
                    t.step_tokens.extend(r.output_ids[n:])
        return events

    def counted_allocate(cls, *a, **kw):
        if t.driver == "step":
            t.built_in_step += 1
        return allocate(cls, *a, **kw)

    monkeypatch.setattr(LLMEngine, "step", driven("step", counted_step))
    monkeypatch.setattr(Scheduler, "postprocess", counted_postprocess)
    monkeypatch.setattr(_Bucket, "allocate", classmethod(counted_allocate))
    entries = {
        (Transformer, "forward"): lambda s, tokens, positions, *a, **kw: (tokens, positions),
        (Transformer, "hidden_states"): lambda s, tokens, positions, *a, **kw: (tokens, positions),
        (FusedStep, "forward_rows"): lambda s, tokens, positions, *a, **kw: (tokens, positions),
        (StepGraphs, "run"): lambda s, step: (step.tokens, step.positions),
        (ModelRunner, "forward_batch"): lambda s, step, *a, **kw: (step.tokens, step.positions),
        (ModelRunner, "forward_sequence"): lambda s, tokens, seq, *a, **kw: (
            tokens, range(seq.length, seq.length + len(tokens))),
    }
    for (cls, name), args in entries.items():
        monkeypatch.setattr(cls, name, forward(f"{cls.__name__}.{name}", getattr(cls, name), args))
    return t


@pytest.fixture
def trace(monkeypatch) -> Trace:
    return tracing(monkeypatch)


def force_path(monkeypatch, path: str, models: list) -> list[ModelRunner]:
    """Every runner built from now on (and the given models', built again) takes `path`: "cpu" is the runner as it
    is; "cpu-reference" has no fused step; "cuda-forced" is CUDA's condition (`_graphable`, no fused step, no
    oneDNN), its step graphs running eagerly over the CPU pool with torch's attention. Returns the runners built,
    which the caller drops from their models afterwards (`unforce`)."""
    built: list[ModelRunner] = []
    if path == "cpu":
        return built
    init = ModelRunner.__init__

    def forced_init(self, model):
        init(self, model)
        self.fused, self.fallback_reason = None, f"{path}: forced by the test"
        if path == "cuda-forced":
            self._graphable, self._onednn = True, False
        built.append(self)

    monkeypatch.setattr(ModelRunner, "__init__", forced_init)
    # compiled Triton needs CUDA memory; another test module may have switched Triton's interpreter on
    monkeypatch.setattr(triton_kernels, "interpreted", lambda: False)
    for m in models:
        monkeypatch.delitem(m.__dict__, "_runner", raising=False)  # the usual runner comes back at teardown
    return built


def unforce(built: list[ModelRunner]) -> None:
    for r in built:
        if r.model.__dict__.get("_runner") is r:
            del r.model.__dict__["_runner"]


@pytest.fixture(scope="module")
def small():
    """A tiny random model as a LoadedModel: every device path's steps in milliseconds (the CUDA path's eager step
    graphs over the real model take minutes on a busy CPU). Prompts are ids (its vocabulary is 97 ids)."""
    from inference_core.engine.loaded_model import LoadedModel
    from engine_reference import tiny_config
    from inference_core.model.loader import build_model
    from inference_core.model.speed_models import IdsTokenizer

    torch.manual_seed(0)
    cfg = tiny_config()
    return LoadedModel("tiny", build_model(cfg, None, torch.device("cpu")), IdsTokenizer(cfg), torch.device("cpu"))


PROMPT = [5, 17, 3, 42, 8, 9, 60, 2]


@pytest.fixture(params=PATHS)
def device_path(request, monkeypatch, small):
    built = force_path(monkeypatch, request.param, [small.model])
    yield request.param
    unforce(built)


def assert_one_loop(t: Trace) -> None:
    loops = t.loops()
    assert not loops, "a second loop: model forwards outside LLMEngine.step() feeding on each other:\n" + "\n".join(
        f"  {b.entry} at positions {b.positions[:4]}… after {a.entry} at {a.positions[-4:]}: {b.where}"
        for a, b in loops[:5])
    assert t.built_in_step == 0, f"{t.built_in_step} step-graph buckets built inside a step"


def assert_made_by_steps(t: Trace, mark: int, out: list[int]) -> None:
    """`out` is exactly the tokens the steps produced since `mark`."""
    made = t.step_tokens[mark:]
    assert out == made, f"tokens not produced by steps: {out} vs {made}"


def mark(t: Trace) -> int:
    return len(t.step_tokens)


# ------------------------------------------------------------------------------------------ the callers


def test_the_engine_api_service_batches_and_speculation_on_every_device_path(trace, small, device_path):
    from inference_core import GenerationParams
    from inference_core.engine.llm_engine import drive
    from inference_core.engine.model_runner import runner_for
    from inference_core.engine.scheduler import Request, SchedulerConfig
    from workers.serving import EngineService
    from inference_core.model.sampling import SamplingParams
    from inference_core.speculative.decode import SpecDecoding, SpecParams
    from inference_core.speculative.speculate import make_draft, run_speculative

    engine, ids = small, PROMPT
    runner = runner_for(engine.model)
    for use_cache in (True, False):
        steps, m = trace.steps, mark(trace)
        out = engine.generate_ids(ids, GenerationParams(max_new_tokens=6, stop_at_eos=False, use_cache=use_cache))
        assert len(out) == 6 and trace.steps - steps == 6
        assert_made_by_steps(trace, m, out)
    if device_path == "cuda-forced":  # batch-1 decode is the bucket-1 step graph, built when the pool was lent
        assert runner.fused is None and runner.use_step_graphs
        (graphed,) = [k for k in runner.path_counts if k.startswith("eager paged step")]
        assert runner.path_counts[graphed] >= 12, runner.path_counts

    service = EngineService(engine)
    steps, m = trace.steps, mark(trace)
    events = list(service.generate_events(ids, GenerationParams(max_new_tokens=4, stop_at_eos=False)))
    out = [e.token_id for e in events if e.type == "token"]
    assert len(out) == 4 and trace.steps - steps == 4
    assert_made_by_steps(trace, m, out)

    reqs = [Request(f"r{i}", p, SamplingParams(max_new_tokens=3, stop_at_eos=False))
            for i, p in enumerate((PROMPT[:3], PROMPT[2:]))]
    steps, m = trace.steps, mark(trace)
    drive(engine, reqs, SchedulerConfig(block_size=16, num_blocks=16), trace=False)
    assert 3 <= trace.steps - steps <= 4  # the two requests share steps
    assert sorted(t for r in reqs for t in r.output_ids) == sorted(trace.step_tokens[m:])

    for draft in ("ngram", "self-early-exit:1"):  # the draft's guesses and the verify: phases of the step
        steps, m = trace.steps, mark(trace)
        out, metrics = run_speculative(engine, ids, draft, SpecParams(k=3, max_new_tokens=5, stop_at_eos=False))
        assert len(out) == 5 and trace.steps - steps == metrics["rounds"]  # one per round, the first the prefill
        assert_made_by_steps(trace, m, out)

    # a speculative request sharing the steps of a plain one
    spec = Request("spec", ids, SpecParams(k=3, max_new_tokens=5, stop_at_eos=False),
                   spec=SpecDecoding(make_draft(engine, "self-early-exit:1"), 3))
    plain = Request("plain", PROMPT[::-1], SamplingParams(max_new_tokens=5, stop_at_eos=False))
    steps, m = trace.steps, mark(trace)
    sched, _ = drive(engine, [spec, plain], SchedulerConfig(block_size=4, num_blocks=16), trace=False)
    assert trace.steps - steps <= 6 and sched.allocator.num_used == 0
    assert sorted(spec.output_ids + plain.output_ids) == sorted(trace.step_tokens[m:])
    assert all(f.driver or set(f.tokens) == {0} for f in trace.forwards)  # strays: only lent pools' warm-ups
    assert_one_loop(trace)


def cli_json(capsys, argv: list[str]) -> dict:
    from inference_core.__main__ import main

    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.model
def test_the_cli_generates_through_step(trace, capsys, tmp_path):
    from inference_core.__main__ import main

    argv = ["generate", "--prompt", "The capital of France is", "--max-new-tokens", "5", "--json"]
    m = mark(trace)
    out = cli_json(capsys, argv)
    assert trace.steps >= 5
    assert_made_by_steps(trace, m, out["token_ids"])
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Hello\nWater boils at\n")
    before = trace.steps
    assert main(["batch", "--prompts-file", str(prompts), "--max-new-tokens", "3"]) == 0
    assert 3 <= trace.steps - before <= 6  # two requests share steps
    assert_one_loop(trace)



def few_tokens(spec) -> dict:
    """The demo's defaults with few new tokens, so every runner finishes in seconds."""
    from demos.registry import validate

    params = {}
    for name in ("max_new_tokens", "n_requests"):
        p = spec.params.get(name)
        if p is not None and p.default is not None:
            params[name] = max(p.min_value or 1, min(p.default, 4))
    return {**validate(spec.name, params), "model": "smollm2-135m"}


@pytest.mark.model
def test_every_demo_runner_generates_through_step(trace, engine, loaded_models):
    from demos.catalog import DEMOS

    generated: dict[str, int] = {}
    for name, spec in DEMOS.items():
        steps = trace.steps
        events = list(spec.load_runner()(few_tokens(spec), models=loaded_models))
        assert events, name
        generated[name] = trace.steps - steps
        assert_one_loop(trace)
    makes_tokens = {name for name, spec in DEMOS.items() if "max_new_tokens" in spec.params}
    assert makes_tokens, DEMOS.keys()
    for name in makes_tokens:
        assert generated[name] > 0, (name, generated)


# ------------------------------------------------------------------------------------------ the guard itself

ROGUE = '''
"""Rogue per-token loops of two tokens, planted by test_one_loop.py (named after a one-pass measurement's file:
no file is exempt)."""
import torch

from inference_core.engine.model_runner import runner_for
from inference_core.engine.paged import SeqSlice
from inference_core.engine.request import StepRows
from engine_reference import KVCache
from inference_core.model.kv_cache import NoCache


@torch.inference_mode()
def uncached(engine, ids, n=2):
    """The whole sequence again every token (what the old test's exempt files could hide)."""
    seq, out = list(ids), []
    for _ in range(n):
        logits = engine.model(torch.tensor([seq]), torch.arange(len(seq)), NoCache(), last_only=True)
        out.append(int(logits[0, -1].argmax()))
        seq.append(out[-1])
    return out


@torch.inference_mode()
def contiguous_cache(engine, ids, n=2):
    """Prefill into a cache, then one token per forward: the old CUDA graph decoder's shape."""
    cfg = engine.config
    cache = KVCache.allocate(cfg.n_layers, 1, cfg.n_kv_heads, len(ids) + n, cfg.head_dim, engine.dtype, "cpu")
    feed, start, out = list(ids), 0, []
    for _ in range(n):
        logits = engine.model(torch.tensor([feed]), torch.arange(start, start + len(feed)), cache, last_only=True)
        out.append(int(logits[0, -1].argmax()))
        start, feed = start + len(feed), out[-1:]
    return out


@torch.inference_mode()
def own_sequence(engine, ids, n=2):
    """The runner's own-blocks entry point (a model draft's), outside a step."""
    runner = runner_for(engine.model)
    seq = runner.new_sequence(len(ids) + n)
    feed, out = list(ids), []
    try:
        for _ in range(n):
            out.append(int(runner.forward_sequence(feed, seq)[-1].argmax()))
            feed = out[-1:]
    finally:
        seq.close()
    return out


@torch.inference_mode()
def paged_steps(engine, ids, n=2):
    """The runner's batch entry point on a pool of its own, no scheduler."""
    runner = runner_for(engine.model)
    pool = runner.lend_pool(4, 16)
    feed, start, out = list(ids), 0, []
    try:
        for _ in range(n):
            end = start + len(feed)
            step = StepRows(feed, list(range(start, end)), [0] * len(feed), [len(feed) - 1],
                            [SeqSlice(0, len(feed), end, [0, 1, 2, 3])])
            out.append(int(runner.forward_batch(step, pool)[-1].argmax()))
            start, feed = end, out[-1:]
    finally:
        runner.give_back(pool)
    return out
'''


@pytest.fixture
def rogue(tmp_path, monkeypatch):
    (tmp_path / "perplexity.py").write_text(ROGUE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "perplexity", raising=False)
    import perplexity

    yield perplexity
    sys.modules.pop("perplexity", None)


@pytest.mark.parametrize("loop", ["uncached", "contiguous_cache", "own_sequence", "paged_steps"])
def test_the_guard_catches_a_planted_two_token_loop(trace, rogue, small, device_path, loop):
    engine = small
    out = getattr(rogue, loop)(engine, PROMPT)
    assert len(out) == 2
    with pytest.raises(AssertionError, match="a second loop") as caught:
        assert_one_loop(trace)
    assert "perplexity.py" in str(caught.value)  # the rogue file, found with no file exempt
    if device_path == "cuda-forced" and loop in ("own_sequence", "paged_steps"):  # caught on the step-graph path
        from inference_core.engine.model_runner import runner_for

        assert any(k.startswith("eager paged step") for k in runner_for(engine.model).path_counts)


def test_the_guard_allows_one_pass_measurements_but_not_their_continuation(trace, rogue, small):
    """The same forward twice (a timing repeated, a second backend) and unrelated one-pass forwards are no loop;
    one more token after them is."""
    rogue.uncached(small, PROMPT, n=1)
    rogue.uncached(small, PROMPT, n=1)
    rogue.uncached(small, PROMPT[3:], n=1)
    assert_one_loop(trace)
    rogue.uncached(small, PROMPT + [42], n=1)
    with pytest.raises(AssertionError, match="a second loop"):
        assert_one_loop(trace)


def test_the_guard_catches_tokens_no_step_produced(trace, small):
    """Forwards a tracer cannot see (a CUDA graph replayed by hand runs no Python) still produce tokens that no step
    produced: a run's output must be the steps' own tokens."""
    from inference_core import GenerationParams

    m = mark(trace)
    out = small.generate_ids(PROMPT, GenerationParams(max_new_tokens=3, stop_at_eos=False))
    assert_made_by_steps(trace, m, out)
    with pytest.raises(AssertionError, match="not produced by steps"):
        assert_made_by_steps(trace, m, out + [out[-1]])  # one token more than the steps made
