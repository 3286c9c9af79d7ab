"""ModelRunner: runs one model's forward passes for a sequence over a contiguous KV cache, on the fastest path.

The reference is `Transformer.forward` (model.py), the code the lessons read. On the CPU a step of at most
`MAX_FUSED_POSITIONS` new tokens runs instead through the fused native step (fused_cpu.py), which computes the
same logits up to fp32 summation order (tested token-identical); a longer input to a quantized model runs
as fused chunks too, since its reference layers would dequantize every weight for the call. Every single-sequence caller (the Engine's
generation loop, speculative verify, a model draft's guesses) goes through `forward`, so a fast path added
here reaches all of them. CUDA graphs stay with the Engine's GraphDecoder.
"""
from __future__ import annotations

import weakref

import torch

from .fused_cpu import MAX_FUSED_POSITIONS, FusedStep, fused_model, why_not
from .kv_cache import KVCache
from .model import Transformer
from .quant import QuantizedLinear, quantized_linears


class ModelRunner:
    def __init__(self, model: Transformer) -> None:
        self.model = model
        self.device = model.tok_embeddings.weight.device
        self.fused: FusedStep | None = fused_model(model) if self.device.type == "cpu" else None
        self.quantized = any(isinstance(m, QuantizedLinear) for m in model.modules())

    @property
    def kernel(self) -> str:
        """The path a decode step takes, for run headers and reports."""
        return self.fused.kernel if self.fused is not None else "torch reference"

    @property
    def fallback_reason(self) -> str:
        return "" if self.fused is not None else why_not(self.model)

    @torch.inference_mode()
    def forward(self, tokens: list[int], cache: KVCache, all_rows: bool = False,
                n_layers: int | None = None) -> torch.Tensor:
        """Logits of the new `tokens` at positions cache.length…: [len(tokens), vocab], or [1, vocab] for the
        last one unless `all_rows`. Their K/V are written to `cache`, which advances by len(tokens)."""
        if self.fused is not None and cache.k.shape[1] == 1 and cache.k.dtype == torch.float32:
            if len(tokens) <= MAX_FUSED_POSITIONS:
                return self.fused.forward(tokens, cache, all_rows=all_rows, n_layers=n_layers)
            if self.quantized:  # the reference would dequantize every weight for this one call: chunk instead
                chunks = [self.fused.forward(tokens[i:i + MAX_FUSED_POSITIONS], cache, all_rows=all_rows,
                                             n_layers=n_layers) for i in range(0, len(tokens), MAX_FUSED_POSITIONS)]
                return torch.cat(chunks) if all_rows else chunks[-1]
        start = cache.length
        ids = torch.tensor([tokens], device=self.device)
        positions = torch.arange(start, start + len(tokens), device=self.device)
        return self.model(ids, positions, cache, last_only=not all_rows, n_layers=n_layers)[0]


_runners: "weakref.WeakKeyDictionary[Transformer, ModelRunner]" = weakref.WeakKeyDictionary()


def runner_for(model: Transformer) -> ModelRunner:
    """One runner per model (built at first use: the fused step's weight views are made once)."""
    runner = _runners.get(model)
    if runner is None:
        runner = _runners[model] = ModelRunner(model)
    return runner


def kernels_used(model: Transformer) -> list[str]:
    """What a decode step of `model` runs: the fused CPU step where it applies, else each layer's kernel."""
    runner = runner_for(model)
    if runner.fused is not None:
        return [runner.kernel]
    return sorted({m.kernel for m in quantized_linears(model).values()}) or ["fp32-mkl-sgemm"]
