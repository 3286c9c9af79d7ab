"""A model on a device: the device the settings pick, and a Transformer built there from a state (or seeded)."""
from __future__ import annotations

import platform

import torch

from .config import ModelConfig, engine_settings
from .transformer import Transformer, rope_table, store_wide_weights_column_major


def pick_device() -> torch.device:
    wanted = engine_settings().device
    if wanted:
        return torch.device(wanted)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


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
    else:  # strict: every parameter present and every tensor used (the tied head excepted)
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [m for m in missing if not (m == "output.weight" and cfg.tie_embeddings)]
        if missing or unexpected:
            raise ValueError(f"state mismatch: missing={missing} unexpected={unexpected}")
    if cfg.tie_embeddings:
        model.output.weight = model.tok_embeddings.weight
    model = model.to(dtype).eval()
    if device.type == "cpu":
        store_wide_weights_column_major(model)
    return model


def device_name(device: torch.device | str = "cpu") -> str:
    """The processor's name as the OS reports it, e.g. 'AMD EPYC' or 'NVIDIA H100 80GB HBM3'."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"
