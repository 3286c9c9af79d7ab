"""The library API: load a model by name, generate tokens, stream typed trace events."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from functools import lru_cache

import torch

from ..kernels.cuda_graphs import GraphDecoder, capacity_bucket, compile_enabled, graphs_enabled
from ..model.config import DEFAULT_MODEL, engine_settings
from ..model.kv_cache import KVCache
from ..model.loader import build_model, pick_device
from ..model.sampling import SamplingParams, sample
from ..model.speed_models import SPEED_ONLY_LABEL, is_speed_only, speed_only_parts
from ..model.tokenizer import Tokenizer
from ..model.transformer import Transformer
from ..model.weights import load_config, load_state, load_tokenizer
from ..quant.formats import QuantFormat, parse_format
from ..quant.quantize import quantize_model
from .cost import step_cost
from .llm_engine import generate_one
from .paged import pool_bytes_per_token
from .scheduler import Request
from .trace import RunFinished, RunStarted, TokenStep, TraceEvent


@dataclass(frozen=True)
class GenerationParams(SamplingParams):
    """A request to `LoadedModel.generate`: the sampling fields plus the lesson's switches."""

    use_cache: bool = True  # False: every step re-feeds the whole sequence (what the KV cache saves)
    chat: bool = False  # wrap the prompt in the model's chat template


class LoadedModel:
    """One model on one device with its tokenizer: what `load_engine` returns and a run generates with. Not the
    engine: `LLMEngine` (llm_engine.py) is the loop that schedules and steps requests over it. Not thread-safe: a
    worker serialises access with `lock`."""

    def __init__(self, name: str, model: Transformer, tokenizer: Tokenizer, device: torch.device,
                 kv_dtype: str = "auto") -> None:
        self.name = name
        self.kv_dtype = kv_dtype  # what a run's KV pool stores: "auto" (the model's dtype) or "int8"
        self.model = model
        self.config = model.config
        self.tokenizer = tokenizer
        self.device = device
        self.dtype = next(model.parameters()).dtype
        self.lock = threading.Lock()
        self._graph_decoders: dict[int, GraphDecoder] = {}  # by capacity bucket (CUDA only)
        # models derived from this one (a speculative draft's int8 copy), made once and freed with the engine
        self.derived_models: dict[str, Transformer] = {}

    def graph_decoder(self, n_tokens: int) -> GraphDecoder | None:
        """A CUDA-graph decoder with room for `n_tokens`, reused across requests; None where graphs are off."""
        if not graphs_enabled(self.model, self.device):
            return None
        capacity = capacity_bucket(n_tokens, self.config.max_seq_len)
        if capacity not in self._graph_decoders:
            if len(self._graph_decoders) >= 4:  # each holds a KV buffer and a graph memory pool
                self._graph_decoders.pop(next(iter(self._graph_decoders)))
            self._graph_decoders[capacity] = GraphDecoder(self.model, capacity, compile=compile_enabled())
        return self._graph_decoders[capacity]

    @property
    def dtype_name(self) -> str:
        """"bfloat16", "float32": the dtype as run headers, reports and benches name it."""
        return str(self.dtype).removeprefix("torch.")

    @property
    def bytes_per_value(self) -> int:
        return torch.tensor([], dtype=self.dtype).element_size()

    def encode_prompt(self, prompt: str, chat: bool) -> list[int]:
        text = self.tokenizer.chat_prompt(prompt) if chat else prompt
        return self.tokenizer.encode(text)

    def new_cache(self, capacity: int, batch: int = 1) -> KVCache:
        cfg = self.config
        return KVCache.allocate(cfg.n_layers, batch, cfg.n_kv_heads, capacity, cfg.head_dim, self.dtype, self.device)

    @torch.inference_mode()
    def generate_ids(self, prompt_ids: list[int], params: GenerationParams) -> list[int]:
        """Convenience: run `generate_events` and return only the generated token ids."""
        return [e.token_id for e in self.generate_events(prompt_ids, params) if isinstance(e, TokenStep)]

    def generate(self, prompt: str, params: GenerationParams,
                 should_stop: Callable[[], bool] | None = None) -> Iterator[TraceEvent]:
        return self.generate_events(self.encode_prompt(prompt, params.chat), params, should_stop)

    def run_started(self, prompt_ids: list[int], params) -> RunStarted:
        """The header of every single-request run (plain, batched or speculative): model, device, prompt, params."""
        cfg = self.config
        return RunStarted(
            model=self.name, device=str(self.device), dtype=self.dtype_name,
            prompt_token_ids=list(prompt_ids), prompt_tokens=[self.tokenizer.token_text(t) for t in prompt_ids],
            params=asdict(params), n_layers=cfg.n_layers,
            kv_bytes_per_token=pool_bytes_per_token(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, self.dtype,
                                                    self.kv_dtype),
        )

    def generate_events(self, prompt_ids: list[int], params: GenerationParams,
                        should_stop: Callable[[], bool] | None = None) -> Iterator[TraceEvent]:
        """Prefill, then decode one token per forward; yields run_started, token…, run_finished.

        A one-request schedule of `LLMEngine.step()`. With `use_cache=False` no K/V are kept and every step
        re-feeds the whole sequence, which is what the KV cache saves; outputs are identical either way (tested).
        """
        cfg = self.config
        if not prompt_ids:
            raise ValueError("prompt is empty")
        total = len(prompt_ids) + params.max_new_tokens
        if total > cfg.max_seq_len:
            raise ValueError(f"prompt + new tokens = {total} exceeds the model's {cfg.max_seq_len} positions")
        yield self.run_started(prompt_ids, params)
        # On CUDA a cached run decodes through a captured graph over a contiguous cache (same arithmetic,
        # one launch per step); everything else is the scheduler's one-request step.
        graph = self.graph_decoder(total) if params.use_cache and self.kv_dtype == "auto" else None
        if graph is not None:
            yield from self._generate_with_graph(graph, prompt_ids, params, should_stop)
            return
        request = Request("run", list(prompt_ids), params)
        yield from generate_one(self, request, kv_cache=params.use_cache, should_stop=should_stop)

    def _generate_with_graph(self, graph: GraphDecoder, prompt_ids: list[int], params: GenerationParams,
                             should_stop: Callable[[], bool] | None) -> Iterator[TraceEvent]:
        cfg = self.config
        bpv = self.bytes_per_value
        generator = params.generator()
        seq = list(prompt_ids)
        out: list[int] = []
        times: list[float] = []
        finish = "length"
        with torch.inference_mode():
            for step in range(params.max_new_tokens):
                if should_stop is not None and should_stop():
                    finish = "cancelled"
                    break
                feed = list(seq) if step == 0 else seq[-1:]
                start = 0 if step == 0 else len(seq) - 1
                t0 = time.perf_counter()
                last = graph.prefill(feed) if step == 0 else graph.decode(feed[0])
                token = sample(last, params, generator)
                torch.cuda.current_stream().synchronize()  # not the device: another thread may capture
                dt = time.perf_counter() - t0
                times.append(dt)
                seq.append(token)
                out.append(token)
                flops, moved = step_cost(cfg, len(feed), start + len(feed), 1, bpv, True)
                per_layer = graph.cache.bytes_per_layer()
                yield TokenStep(
                    phase="prefill" if step == 0 else "decode", step=step, token_id=token,
                    text=self.tokenizer.token_text(token), position=len(seq) - 1, n_input_tokens=len(feed),
                    step_time_s=dt, kv_bytes_total=per_layer * cfg.n_layers,
                    kv_bytes_per_layer=[per_layer] * cfg.n_layers, flops=flops, bytes_moved=moved,
                )
                if params.stop_at_eos and token == cfg.eos_token_id:
                    finish = "eos"
                    break
        ttft = times[0] if times else 0.0
        tpot = (sum(times[1:]) / (len(times) - 1)) if len(times) > 1 else 0.0
        yield RunFinished(
            token_ids=out, text=self.tokenizer.decode(out, skip_special=True), finish_reason=finish,
            n_prompt_tokens=len(prompt_ids), n_generated=len(out), ttft_s=ttft, tpot_s=tpot,
            tokens_per_s=(len(times) - 1) / sum(times[1:]) if len(times) > 1 else 0.0,
            kv_bytes=graph.cache.bytes_used(),
        )


@lru_cache(maxsize=2)
def load_engine(name: str = DEFAULT_MODEL, device: str | None = None) -> LoadedModel:
    """Load once per process (cached): weights from the safetensors cache, fp32 on the CPU and bf16 on CUDA
    (INFERENCE_DTYPE overrides; the dtype is in every run header). A speed-only name
    (speed_models.py) gives its shape with seeded random weights, labelled as such."""
    dev = torch.device(device) if device else pick_device()
    dtype = getattr(torch, engine_settings().dtype_for(dev.type))
    if is_speed_only(name):
        return speed_only_engine(name, dev, dtype)
    cfg = load_config(name)
    model = build_model(cfg, load_state(name), dev, dtype)
    return LoadedModel(name, model, load_tokenizer(name), dev)


def quantized_engine(engine: LoadedModel, fmt: QuantFormat | str) -> LoadedModel:
    """A new LoadedModel around a quantized copy of `engine.model` (the cached engine is left as it was)."""
    fmt = parse_format(fmt) if isinstance(fmt, str) else fmt
    qmodel = quantize_model(engine.model, fmt, inplace=False)
    return LoadedModel(f"{engine.name}:{fmt.name}", qmodel, engine.tokenizer, engine.device)


def speed_only_engine(name: str, device: torch.device, dtype: torch.dtype = torch.float32,
                      n_layers: int | None = None) -> LoadedModel:
    """A LoadedModel around speed-only model `name` (seeded random weights; `n_layers` trims it, for tests),
    named with `SPEED_ONLY_LABEL` so every run header says so."""
    cfg, tokenizer = speed_only_parts(name, n_layers)
    return LoadedModel(f"{name} ({SPEED_ONLY_LABEL})", build_model(cfg, None, device, dtype), tokenizer, device)
