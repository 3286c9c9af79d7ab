"""The library API: load a model by name, generate tokens, stream typed trace events."""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import torch

from ..model.config import DEFAULT_MODEL, engine_settings
from ..model.loader import build_model, pick_device
from ..model.sampling import SamplingParams
from ..model.speed_models import SPEED_ONLY_LABEL, is_speed_only, speed_only_parts
from ..model.tokenizer import Tokenizer
from ..model.transformer import Transformer
from ..model.weights import load_config, load_state, load_tokenizer
from ..quant.formats import QuantFormat, parse_format
from ..quant.quantize import quantize_model
from .llm_engine import generate_one
from .paged import pool_bytes_per_token
from .scheduler import Request
from .trace import RunStarted, TokenStep, TraceEvent


@dataclass(frozen=True)
class GenerationParams(SamplingParams):
    """A request to `LoadedModel.generate`: the sampling fields plus the lesson's switches."""
    use_cache: bool = True  # False: every step re-feeds the whole sequence (what the KV cache saves)
    chat: bool = False  # wrap the prompt in the model's chat template


class LoadedModel:
    """One model on one device with its tokenizer (not the loop: that is `LLMEngine`). Not thread-safe: use `lock`."""

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
        # models derived from this one (a speculative draft's int8 copy), made once and freed with the engine
        self.derived_models: dict[str, Transformer] = {}

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

    @torch.inference_mode()
    def generate_ids(self, prompt_ids: list[int], params: GenerationParams) -> list[int]:
        """Convenience: run `generate_events` and return only the generated token ids."""
        return [e.token_id for e in self.generate_events(prompt_ids, params) if isinstance(e, TokenStep)]

    def generate(self, prompt: str, params: GenerationParams,
                 should_stop: Callable[[], bool] | None = None) -> Iterator[TraceEvent]:
        return self.generate_events(self.encode_prompt(prompt, params.chat), params, should_stop)

    def run_started(self, prompt_ids: list[int], params, **extra) -> RunStarted:
        """The header of every single-request run (plain, batched or speculative): model, device, prompt, params
        (`extra`: more entries for `params`, e.g. a speculative run's draft)."""
        cfg = self.config
        return RunStarted(
            model=self.name, device=str(self.device), dtype=self.dtype_name,
            prompt_token_ids=list(prompt_ids), prompt_tokens=[self.tokenizer.token_text(t) for t in prompt_ids],
            params={**asdict(params), **extra}, n_layers=cfg.n_layers,
            kv_bytes_per_token=pool_bytes_per_token(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, self.dtype,
                                                    self.kv_dtype),
        )

    def generate_events(self, prompt_ids: list[int], params: GenerationParams,
                        should_stop: Callable[[], bool] | None = None) -> Iterator[TraceEvent]:
        """Prefill, then decode one token per forward; yields run_started, token…, run_finished."""
        cfg = self.config
        if not prompt_ids:
            raise ValueError("prompt is empty")
        total = len(prompt_ids) + params.max_new_tokens
        if total > cfg.max_seq_len:
            raise ValueError(f"prompt + new tokens = {total} exceeds the model's {cfg.max_seq_len} positions")
        yield self.run_started(prompt_ids, params)
        request = Request("run", list(prompt_ids), params)
        yield from generate_one(self, request, kv_cache=params.use_cache, should_stop=should_stop)


def load_engine(name: str = DEFAULT_MODEL, device: str | None = None) -> LoadedModel:
    """Load a model, anew on every call: weights from the safetensors cache, fp32 on the CPU and bf16 on CUDA
    (INFERENCE_DTYPE overrides); a speed-only name gets seeded random weights, labelled (docs/engine-notes.md)."""
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
    qmodel = quantize_model(engine.model, fmt)
    return LoadedModel(f"{engine.name}:{fmt.name}", qmodel, engine.tokenizer, engine.device)


def speed_only_engine(name: str, device: torch.device, dtype: torch.dtype = torch.float32,
                      n_layers: int | None = None) -> LoadedModel:
    """Speed-only model `name` (seeded random weights, `n_layers` trims it), labelled `SPEED_ONLY_LABEL`."""
    cfg, tokenizer = speed_only_parts(name, n_layers)
    return LoadedModel(f"{name} ({SPEED_ONLY_LABEL})", build_model(cfg, None, device, dtype), tokenizer, device)
