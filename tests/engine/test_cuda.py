"""The engine on a CUDA device: same answers as transformers and as our CPU paths.

Skipped where there is no GPU (CI); run on a GPU machine with `pytest tests/engine/test_cuda.py`.
A single cached request decodes through `LLMEngine.step()` there too: its decode steps replay the runner's
bucket-1 paged step graph (the step graphs themselves are checked eagerly on the CPU in test_paged_graphs.py).
"""
from __future__ import annotations

import pytest
import torch

from inference_core import GenerationParams
from inference_core.engine.model_runner import runner_for
from inference_core.model.loader import build_model

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "<|im_start|>user\nExplain the KV cache in one sentence.<|im_end|>\n<|im_start|>assistant\n",
]


def test_the_default_dtype_is_bf16_on_a_gpu_and_fp32_on_the_cpu():
    from inference_core.model.config import EngineSettings

    assert EngineSettings().dtype_for("cuda") == "bfloat16"
    assert EngineSettings().dtype_for("cpu") == "float32"
    assert EngineSettings.from_env({"INFERENCE_DTYPE": "float32"}).dtype_for("cuda") == "float32"


@needs_cuda
@pytest.mark.model
def test_a_default_cuda_engine_runs_bf16_and_says_so():
    from inference_core.engine.loaded_model import load_engine

    engine = load_engine("smollm2-135m", device="cuda")
    assert engine.dtype == torch.bfloat16
    started = next(iter(engine.generate("Hello", GenerationParams(max_new_tokens=2)))).to_dict()
    assert started["dtype"] == "bfloat16"


# ------------------------------------------------------------------------------------------ on a GPU


@pytest.fixture(scope="module")
def cuda_engine():
    """fp32 on the GPU (the engine's default there is bf16): the comparisons below are with fp32 transformers."""
    from inference_core.engine.loaded_model import LoadedModel
    from inference_core.model.weights import load_config, load_state, load_tokenizer

    device = torch.device("cuda")
    model = build_model(load_config("smollm2-135m"), load_state("smollm2-135m"), device, torch.float32)
    return LoadedModel("smollm2-135m", model, load_tokenizer("smollm2-135m"), device)


@pytest.fixture(scope="module")
def hf_cuda():
    from engine_reference import hf_reference

    return hf_reference("cuda")


def eager(monkeypatch, engine, ids, params):
    from bench.common import settings_override

    with settings_override(cuda_graphs=False):
        return engine.generate_ids(ids, params)


@needs_cuda
@pytest.mark.model
@pytest.mark.parametrize("text", PROMPTS)
def test_cuda_logits_match_transformers(cuda_engine, hf_cuda, text):
    from inference_core.model.kv_cache import NoCache

    ids = cuda_engine.tokenizer.encode(text)
    tokens = torch.tensor([ids], device="cuda")
    with torch.inference_mode():
        ref = hf_cuda(tokens).logits
        ours = cuda_engine.model(tokens, torch.arange(len(ids), device="cuda"), NoCache())
    assert (ours - ref).abs().max().item() <= 1e-3


@needs_cuda
@pytest.mark.model
@pytest.mark.parametrize("text", PROMPTS)
def test_cuda_graph_greedy_identical_to_transformers(cuda_engine, hf_cuda, text):
    ids = cuda_engine.tokenizer.encode(text)
    runner = runner_for(cuda_engine.model)
    before = runner.path_counts.copy()
    ours = cuda_engine.generate_ids(ids, GenerationParams(max_new_tokens=32))
    taken = runner.path_counts - before
    # every decode step (and a prompt of ≤ 64 tokens) replays a paged step graph
    assert sum(n for k, n in taken.items() if k.startswith("cuda graph paged step")) >= len(ours) - 1, taken
    with torch.inference_mode():
        ref = hf_cuda.generate(torch.tensor([ids], device="cuda"), max_new_tokens=32, do_sample=False,
                               pad_token_id=cuda_engine.config.eos_token_id)
    assert ours == ref[0, len(ids):].tolist()


@needs_cuda
@pytest.mark.model
def test_cuda_graph_reused_across_requests_equals_eager_and_cpu(cuda_engine, engine, monkeypatch):
    """Requests of different lengths in one pool size class borrow one lent pool and its step graphs (captured
    when the pool was first lent, never inside a step): each equals the eager CUDA path and the CPU engine."""
    from inference_core.engine.llm_engine import LLMEngine
    from inference_core.kernels import paged_graphs

    captures = {"in step": 0, "at lending": 0}
    in_step = [False]
    step, capture = LLMEngine.step, paged_graphs.capture

    def counted_step(self):
        in_step[0] = True
        try:
            return step(self)
        finally:
            in_step[0] = False

    def counted_capture(run_step):
        captures["in step" if in_step[0] else "at lending"] += 1
        return capture(run_step)

    monkeypatch.setattr(LLMEngine, "step", counted_step)
    monkeypatch.setattr(paged_graphs, "capture", counted_capture)
    params = GenerationParams(max_new_tokens=40, stop_at_eos=False)
    for i, text in enumerate((PROMPTS[1], PROMPTS[0], PROMPTS[2])):
        ids = cuda_engine.tokenizer.encode(text)
        graphed = cuda_engine.generate_ids(ids, params)
        if i == 0:
            first = dict(captures)
        assert graphed == eager(monkeypatch, cuda_engine, ids, params)
        assert graphed == cuda_engine.generate_ids(ids, GenerationParams(max_new_tokens=40, stop_at_eos=False,
                                                                        use_cache=False))
        assert graphed[:24] == engine.generate_ids(ids, params)[:24]  # CPU: other kernels, same argmax early on
    assert captures["in step"] == 0, captures
    assert captures == first, (first, captures)  # the later requests borrowed the first one's pool and graphs


@needs_cuda
@pytest.mark.model
def test_cuda_trace_reports_device_and_cache_bytes(cuda_engine):
    events = [e.to_dict() for e in cuda_engine.generate("Tell me about caches.", GenerationParams(max_new_tokens=6))]
    started, *steps, finished = events
    assert started["device"].startswith("cuda")
    for s in steps:
        assert s["kv_bytes_total"] == started["kv_bytes_per_token"] * s["position"]
    assert finished["kv_bytes"] == started["kv_bytes_per_token"] * (len(started["prompt_token_ids"]) + len(steps) - 1)


@needs_cuda
@pytest.mark.model
def test_cuda_seeded_sampling_is_reproducible(cuda_engine):
    ids = cuda_engine.tokenizer.encode(PROMPTS[0])
    params = GenerationParams(max_new_tokens=16, temperature=0.8, top_k=50, top_p=0.95, seed=7, stop_at_eos=False)
    assert cuda_engine.generate_ids(ids, params) == cuda_engine.generate_ids(ids, params)


@needs_cuda
@pytest.mark.model
def test_cuda_scheduler_matches_single_requests(cuda_engine, monkeypatch):
    """Continuous batching with prefix caching and a pool small enough to force preemption, on the GPU."""
    from inference_core.engine.llm_engine import drive
    from inference_core.model.sampling import SamplingParams
    from inference_core.engine.scheduler import Request, SchedulerConfig

    shared = cuda_engine.tokenizer.encode("You are a helpful assistant who answers briefly. ")
    prompts = [shared + cuda_engine.tokenizer.encode(q) for q in
               ("What is a cache?", "Name a colour.", "Count to five:", "Why is the sky blue?")]
    config = SchedulerConfig(mode="continuous", block_size=4, num_blocks=24, prefix_caching=True)
    reqs = [Request(f"r{i}", p, SamplingParams(max_new_tokens=20, stop_at_eos=False)) for i, p in enumerate(prompts)]
    sched, _ = drive(cuda_engine, reqs, config, trace=False, arrival_steps={f"r{i}": 2 * i for i in range(4)})
    assert sched.num_preemptions > 0
    assert sched.prefix.hit_tokens > 0
    finished = sorted(sched.finished, key=lambda r: r.request_id)
    assert len(finished) == len(prompts)
    for req, prompt in zip(finished, prompts):
        alone = eager(monkeypatch, cuda_engine, prompt, GenerationParams(max_new_tokens=20, stop_at_eos=False))
        assert req.output_ids == alone, req.request_id


@needs_cuda
@pytest.mark.model
@pytest.mark.parametrize("draft", ["ngram", "self-early-exit:8", "self-int8"])
def test_cuda_speculative_greedy_equals_plain(cuda_engine, monkeypatch, draft):
    from inference_core.speculative.decode import SpecParams
    from inference_core.speculative.speculate import run_speculative

    ids = cuda_engine.tokenizer.encode("Repeat after me: the quick brown fox jumps over the lazy dog. "
                                       "The quick brown fox")
    ours, metrics = run_speculative(cuda_engine, ids, draft, SpecParams(k=4, max_new_tokens=32, stop_at_eos=False))
    assert ours == eager(monkeypatch, cuda_engine, ids, GenerationParams(max_new_tokens=32, stop_at_eos=False))
    assert metrics["n_generated"] == 32


@needs_cuda
@pytest.mark.parametrize("fmt", ["int8", "w8a8", "int4-g128", "nf4", "fp8", "llm-int8"])
def test_cuda_quantized_linear_equals_cpu_and_dequantize_then_matmul(fmt):
    """Quantizing on the GPU gives the CPU's weights (CUDA divides by a scalar as a multiply by its reciprocal,
    so a scale may differ in the last bit and a rare value on a rounding tie lands one step over); the product
    equals x @ dequantize()ᵀ for weight-only formats and the CPU layer's (activation rounding included) for
    w8a8 and LLM.int8."""
    from inference_core.quant.linears import quantize_linear

    torch.manual_seed(0)
    w = torch.randn(1536, 576) * 0.05
    x = torch.randn(3, 576)
    x[:, 5] = 8.0  # one outlier column for LLM.int8 (threshold 6)
    gpu, cpu = quantize_linear(w.cuda(), fmt), quantize_linear(w, fmt)
    assert all(b.device.type == "cuda" for b in gpu.buffers())
    moved = (gpu.dequantize().cpu() - cpu.dequantize()).abs() > 1e-6
    assert moved.float().mean() < 1e-3
    y = gpu(x.cuda())
    torch.testing.assert_close(y.cpu(), cpu(x), rtol=0, atol=0.02)
    if fmt not in ("w8a8", "llm-int8"):
        torch.testing.assert_close(y, x.cuda() @ gpu.dequantize().T, rtol=1e-4, atol=1e-4)


@needs_cuda
@pytest.mark.model
def test_cuda_quantized_engine_generates(cuda_engine):
    from inference_core.engine.loaded_model import quantized_engine
    from inference_core.quant.linears import quantized_linears

    ids = cuda_engine.tokenizer.encode(PROMPTS[0])
    fp = cuda_engine.generate_ids(ids, GenerationParams(max_new_tokens=8))
    q = quantized_engine(cuda_engine, "int8")
    # int8 linears run the fused Triton kernel (no host sync), so the step is captured; LLM.int8 counts its
    # outliers on the host and decodes eagerly
    assert {layer.kernel for layer in quantized_linears(q.model).values()} == {"triton-int8"}
    assert runner_for(q.model).use_step_graphs
    assert not runner_for(quantized_engine(cuda_engine, "llm-int8").model).use_step_graphs
    assert q.generate_ids(ids, GenerationParams(max_new_tokens=8))[:4] == fp[:4]


@needs_cuda
@pytest.mark.model
@pytest.mark.parametrize("fmt", ["int8", "int4-g128", "nf4", "fp8"])
def test_cuda_quantized_step_graphs_capture_every_bucket(cuda_engine, fmt):
    """A quantized model's pool is lent with every bucket captured (none may dequantize inside a capture: NF4's
    dequantize copied its codebook from the host, which CUDA refuses), and a 40-token step replayed from the
    64 bucket gives the eager step's logits."""
    from bench.common import settings_override
    from inference_core.engine.loaded_model import quantized_engine
    from inference_core.engine.paged import SeqSlice
    from inference_core.kernels.paged_graphs import BUCKETS
    from inference_core.engine.request import StepRows
    from inference_core.engine.model_runner import runner_for

    runner = runner_for(quantized_engine(cuda_engine, fmt).model)
    assert runner.use_step_graphs
    pool = runner.lend_pool(64, 16)
    graphs = pool.step_graphs
    assert sorted(graphs.buckets) == list(BUCKETS) and all(b.graph is not None for b in graphs.buckets.values())
    ids = cuda_engine.tokenizer.encode(" ".join(["the quick brown fox jumps over the lazy dog"] * 5))[:40]
    step = StepRows(ids, list(range(40)), [0] * 40, list(range(40)), [SeqSlice(0, 40, 40, [1, 2, 3])])
    got = runner.forward_batch(step, pool).float()
    assert graphs.replays.get(64) == 1
    with settings_override(cuda_graphs=False):
        want = runner.forward_batch(step, pool).float()  # the same K/V again, eagerly
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)
    assert (got.argmax(-1) == want.argmax(-1)).float().mean() > 0.95
    runner.give_back(pool)


@needs_cuda
@pytest.mark.parametrize("fmt", ["bnb-int8", "bnb-nf4"])
def test_cuda_bitsandbytes_backend_matches_its_own_dequantization(fmt):
    """bitsandbytes as a backend beside ours: its product ≈ x @ its dequantized weightᵀ, the weight really
    packed (≤ 1 byte per value), and NF4 close to our own NF4 of the same weight."""
    pytest.importorskip("bitsandbytes")
    from inference_core.quant.linears import quantize_linear

    torch.manual_seed(0)
    w = torch.randn(1536, 576, device="cuda") * 0.05
    x = torch.randn(1, 576, device="cuda")
    layer = quantize_linear(w, fmt)
    assert layer.weight_bytes() <= w.numel() * (1.1 if fmt == "bnb-int8" else 0.6)
    deq = layer.dequantize()
    # bnb-int8 also rounds the activations to int8 (LLM.int8 below the outlier threshold)
    torch.testing.assert_close(layer(x), x @ deq.T, rtol=0, atol=0.05 if fmt == "bnb-int8" else 0.02)
    if fmt == "bnb-nf4":  # same codebook and block size: all but values on a rounding boundary agree
        ours = quantize_linear(w, "nf4").dequantize()
        assert ((deq - ours).abs() < 1e-3).float().mean() > 0.99


@needs_cuda
@pytest.mark.model
def test_cuda_bitsandbytes_engine_generates(cuda_engine):
    pytest.importorskip("bitsandbytes")
    from inference_core.engine.loaded_model import quantized_engine
    from inference_core.engine.model_runner import kernels_used

    ids = cuda_engine.tokenizer.encode(PROMPTS[0])
    fp = cuda_engine.generate_ids(ids, GenerationParams(max_new_tokens=8))
    for fmt in ("bnb-int8", "bnb-nf4"):
        q = quantized_engine(cuda_engine, fmt)
        assert kernels_used(q.model) == [f"bitsandbytes-{'int8-matmul' if fmt == 'bnb-int8' else 'nf4-gemv'}"]
        out = q.generate_ids(ids, GenerationParams(max_new_tokens=8))
        assert len(out) >= 1 and out[0] == fp[0], (fmt, out, fp)
