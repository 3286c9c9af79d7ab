"""The library API: load a model by name, generate tokens, stream typed trace events."""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from functools import lru_cache

import torch

from .config import DEFAULT_MODEL, ModelConfig
from .cuda_graphs import GraphDecoder, capacity_bucket, compile_enabled, graphs_enabled
from .kv_cache import KVCache, NoCache
from .model import Transformer, load_state_into, rope_table, store_wide_weights_column_major
from .quant import QuantFormat, parse_format, quantize_model
from .runner import runner_for
from .sampling import SamplingParams, sample
from .tokenizer import Tokenizer, load_tokenizer
from .trace import RunFinished, RunStarted, TokenStep, TraceEvent


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int = 32
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None
    use_cache: bool = True
    chat: bool = False
    stop_at_eos: bool = True

    @property
    def sampling(self) -> SamplingParams:
        return SamplingParams(self.temperature, self.top_k, self.top_p)


def pick_device() -> torch.device:
    wanted = os.environ.get("INFERENCE_DEVICE")
    if wanted:
        return torch.device(wanted)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def step_cost(cfg: ModelConfig, n_new: int, n_context: int, n_logits: int, bytes_per_value: int,
              kv_cached: bool) -> tuple[float, float]:
    """(FLOPs, bytes moved) estimate for one forward of `n_new` tokens over `n_context` total positions.

    FLOPs: 2 per multiply-add in every projection, plus QKᵀ and AV (2·2·heads·head_dim per query-key pair).
    Bytes: every weight read once, plus K/V read for attention (and written for the new tokens).
    """
    body = cfg.matmul_params() - cfg.vocab_size * cfg.dim
    flops = 2.0 * body * n_new + 2.0 * cfg.vocab_size * cfg.dim * n_logits
    pairs = n_new * n_context - (n_new * (n_new - 1)) / 2  # causal: query i sees context − n_new + i + 1 keys
    flops += cfg.n_layers * 4.0 * cfg.n_heads * cfg.head_dim * pairs
    weight_bytes = cfg.matmul_params() * bytes_per_value
    kv_read = cfg.kv_bytes_per_token(bytes_per_value) * (n_context if kv_cached else 0)
    return flops, float(weight_bytes + kv_read)


class Engine:
    """One model on one device. Not thread-safe: a worker serialises access with `lock`."""

    def __init__(self, name: str, model: Transformer, tokenizer: Tokenizer, device: torch.device) -> None:
        self.name = name
        self.model = model
        self.config = model.config
        self.tokenizer = tokenizer
        self.device = device
        self.dtype = next(model.parameters()).dtype
        self.lock = threading.Lock()
        self._graph_decoders: dict[int, GraphDecoder] = {}  # by capacity bucket (CUDA only)

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

    def generate_events(self, prompt_ids: list[int], params: GenerationParams,
                        should_stop: Callable[[], bool] | None = None) -> Iterator[TraceEvent]:
        """Prefill, then decode one token per forward; yields run_started, token…, run_finished.

        With `use_cache=False` every step re-feeds the whole sequence (no K/V kept), which is what the
        KV cache saves. Outputs are identical either way (tested).
        """
        cfg = self.config
        if not prompt_ids:
            raise ValueError("prompt is empty")
        total = len(prompt_ids) + params.max_new_tokens
        if total > cfg.max_seq_len:
            raise ValueError(f"prompt + new tokens = {total} exceeds the model's {cfg.max_seq_len} positions")
        bpv = self.bytes_per_value
        yield RunStarted(
            model=self.name, device=str(self.device), dtype=str(self.dtype).removeprefix("torch."),
            prompt_token_ids=list(prompt_ids), prompt_tokens=[self.tokenizer.token_text(t) for t in prompt_ids],
            params=asdict(params), n_layers=cfg.n_layers, kv_bytes_per_token=cfg.kv_bytes_per_token(bpv),
        )
        generator = None
        if params.seed is not None:
            generator = torch.Generator().manual_seed(params.seed)
        # On CUDA a cached run decodes through a captured graph (same arithmetic, one launch per step).
        graph = self.graph_decoder(total) if params.use_cache else None
        cache = (graph.cache if graph is not None else self.new_cache(total)) if params.use_cache else None
        runner = runner_for(self.model)
        seq = list(prompt_ids)
        out: list[int] = []
        times: list[float] = []
        finish = "length"
        with torch.inference_mode():
            for step in range(params.max_new_tokens):
                if should_stop is not None and should_stop():
                    finish = "cancelled"
                    break
                if cache is None or step == 0:
                    feed, start = list(seq), 0
                else:
                    feed, start = seq[-1:], len(seq) - 1
                t0 = time.perf_counter()
                if graph is not None:
                    last = graph.prefill(feed) if step == 0 else graph.decode(feed[0])
                elif cache is not None:
                    last = runner.forward(feed, cache)[-1]
                else:
                    tokens = torch.tensor([feed], device=self.device)
                    positions = torch.arange(start, start + len(feed), device=self.device)
                    last = self.model(tokens, positions, NoCache(), last_only=True)[0, -1]
                token = sample(last, params.sampling, generator)
                if self.device.type == "cuda":
                    torch.cuda.synchronize()
                dt = time.perf_counter() - t0
                times.append(dt)
                seq.append(token)
                out.append(token)
                flops, moved = step_cost(cfg, len(feed), start + len(feed), 1, bpv, cache is not None)
                per_layer = cache.bytes_per_layer() if cache is not None else 0
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
            kv_bytes=cache.bytes_used() if cache is not None else 0,
        )


def build_model(cfg: ModelConfig, state: dict[str, torch.Tensor] | None, device: torch.device,
                dtype: torch.dtype = torch.float32) -> Transformer:
    with torch.device("meta"):
        model = Transformer(cfg)
    model = model.to_empty(device=device)
    cos, sin = rope_table(cfg, device)
    model.rope_cos, model.rope_sin = cos, sin
    if state is None:
        torch.manual_seed(0)
        for p in model.parameters():
            torch.nn.init.normal_(p, std=0.02)
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                torch.nn.init.ones_(p)
    else:
        load_state_into(model, state)
    if cfg.tie_embeddings:
        model.output.weight = model.tok_embeddings.weight
    model = model.to(dtype).eval()
    if device.type == "cpu":
        store_wide_weights_column_major(model)
    return model


@lru_cache(maxsize=2)
def load_engine(name: str = DEFAULT_MODEL, device: str | None = None) -> Engine:
    """Load once per process (cached): weights from the safetensors cache, fp32 on CPU."""
    from .weights import load_config, load_state

    dev = torch.device(device) if device else pick_device()
    dtype = getattr(torch, os.environ.get("INFERENCE_DTYPE", "float32"))
    cfg = load_config(name)
    model = build_model(cfg, load_state(name), dev, dtype)
    return Engine(name, model, load_tokenizer(name), dev)


def quantized_engine(engine: Engine, fmt: QuantFormat | str) -> Engine:
    """A new Engine around a quantized copy of `engine.model` (the cached engine is left as it was)."""
    fmt = parse_format(fmt) if isinstance(fmt, str) else fmt
    qmodel = quantize_model(engine.model, fmt, inplace=False)
    return Engine(f"{engine.name}:{fmt.name}", qmodel, engine.tokenizer, engine.device)
