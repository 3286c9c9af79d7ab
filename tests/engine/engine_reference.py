"""The reference implementation the engine tests compare against (imported by conftest and test_cuda)."""
from __future__ import annotations

import torch


def hf_reference(device: str = "cpu"):
    """transformers' own GGUF loader (its dequantization and Q/K un-permutation), fp32, eval mode."""
    from transformers import AutoModelForCausalLM

    from inference_core.model.weights import MODELS, gguf_path

    path = gguf_path(MODELS["smollm2-135m"])
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    return model.to(device).eval()
