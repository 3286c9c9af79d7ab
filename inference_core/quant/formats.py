"""Weight formats: their names, and each one's quantize / dequantize of a weight (layers: linears.py)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class QuantFormat:
    name: str
    kind: str  # "fp32" | "int8" | "w8a8" | "int4" | "nf4" | "fp8" | "llm-int8" | "bnb-int8" | "bnb-nf4"
    group: int = 0  # values sharing one scale along the input dim (0: one scale per output channel)
    bits: int = 32

    @property
    def label(self) -> str:
        return FORMATS[self.kind][2]


NF4_BLOCK = 64
FORMATS = {  # kind → (group, bits, label); int4's group is in its name (int4-g32, -g64, -g128)
    "fp32": (0, 32, "fp32 (reference)"),
    "int8": (0, 8, "int8 per-channel, weight-only"),
    "w8a8": (0, 8, "int8 weights × int8 dynamic activations (FBGEMM)"),
    "int4": (128, 4, "int4 symmetric, group-wise"),
    "nf4": (NF4_BLOCK, 4, "NF4 codebook, block absmax"),
    "fp8": (0, 8, "FP8 e4m3, per-channel scale"),
    "llm-int8": (0, 8, "LLM.int8() int8 + fp32 outlier columns"),
    "bnb-int8": (0, 8, "bitsandbytes LLM.int8() (CUDA)"),
    "bnb-nf4": (NF4_BLOCK, 4, "bitsandbytes NF4 (CUDA)"),
}
DEFAULT_FORMATS = ("fp32", "int8", "w8a8", "int4-g128", "nf4", "fp8")


def parse_format(name: str) -> QuantFormat:
    """'int4' → int4-g128; 'int4-g32' → group 32; unknown names raise ValueError listing the choices."""
    key = name.strip().lower()
    if key == "int4":
        key = "int4-g128"
    if key.startswith("int4-g") and key[6:].isdigit() and int(key[6:]) in (32, 64, 128):
        return QuantFormat(key, "int4", int(key[6:]), 4)
    if key in FORMATS:
        return QuantFormat(key, key, *FORMATS[key][:2])
    raise ValueError(f"unknown quantization format {name!r}; choose from "
                     "fp32, int8, w8a8, int4-g32, int4-g64, int4-g128, nf4, fp8, llm-int8, bnb-int8, bnb-nf4")


# ------------------------------------------------------------------------------------------ int8 / fp8


def quantize_int8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row absmax: q = round(w / s) ∈ [-127, 127], s = max|w_row| / 127. Error ≤ s/2 per element."""
    w = w.float()
    scale = w.abs().amax(dim=1).clamp_min(1e-12) / 127.0
    q = torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8)
    return q.contiguous(), scale.contiguous()


def dequantize_int8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float() * scale[:, None]


FP8_MAX = 448.0  # largest finite float8_e4m3fn


def quantize_fp8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row scale so the row's absmax maps to 448, then round to e4m3 (3 mantissa bits, nearest-even)."""
    w = w.float()
    scale = w.abs().amax(dim=1).clamp_min(1e-12) / FP8_MAX
    q = (w / scale[:, None]).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.contiguous(), scale.contiguous()


dequantize_fp8 = dequantize_int8  # the same per-row scale


# ----------------------------------------------------------------------------------- 4-bit: int4 / nf4


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """uint8 codes in [0, 16) of shape [N, K] (K % 32 == 0) → [N, K/2] bytes."""
    n, k = codes.shape
    if k % 32:
        raise ValueError(f"K={k} must be a multiple of 32 to pack nibbles")
    c = codes.to(torch.uint8).reshape(n, k // 32, 2, 16)
    return (c[:, :, 0] | (c[:, :, 1] << 4)).reshape(n, k // 2).contiguous()


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    n, half = packed.shape
    p = packed.reshape(n, half // 16, 16)
    return torch.stack([p & 0x0F, p >> 4], dim=2).reshape(n, half * 2)


def _grouped(w: torch.Tensor, group: int) -> torch.Tensor:
    """[N, K] → [N, ⌈K/group⌉, group], zero-padding a short last group (576 = 4·128 + 64)."""
    n, k = w.shape
    if k % 32 or group % 32:
        raise ValueError(f"K={k} and group={group} must be multiples of 32")
    pad = -k % group
    return F.pad(w.float(), (0, pad)).reshape(n, (k + pad) // group, group)


def _ungrouped(g: torch.Tensor, k: int) -> torch.Tensor:
    return g.reshape(g.shape[0], -1)[:, :k]


def quantize_int4(w: torch.Tensor, group: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric group-wise int4: q = round(w / s) ∈ [-7, 7], s = max|w_group| / 7, stored as q + 8."""
    g = _grouped(w, group)
    scale = g.abs().amax(dim=2).clamp_min(1e-12) / 7.0
    q = torch.round(g / scale[..., None]).clamp_(-7, 7) + 8
    return pack_nibbles(_ungrouped(q, w.shape[1]).to(torch.uint8)), scale.contiguous()


def dequantize_int4(packed: torch.Tensor, scale: torch.Tensor, group: int) -> torch.Tensor:
    q = unpack_nibbles(packed).float() - 8
    return _ungrouped(_grouped(q, group) * scale[..., None], q.shape[1])


def nf4_codebook() -> torch.Tensor:
    """The 16 NF4 levels, computed as in QLoRA (Dettmers et al. 2023, appendix E)."""
    offset = 0.9677083
    pos = torch.special.ndtri(torch.linspace(offset, 0.5, 9, dtype=torch.float64)[:-1])
    neg = -torch.special.ndtri(torch.linspace(offset, 0.5, 8, dtype=torch.float64)[:-1])
    v = torch.cat([pos, torch.zeros(1, dtype=torch.float64), neg]).sort().values
    # rounded to fp16 (changes the levels by < 2.5e-4) so the AVX2 kernel's fp16 lookup table is exact
    return (v / v.abs().max()).half().float()


NF4_CODEBOOK = nf4_codebook()
INT4_LUT = (torch.arange(16, dtype=torch.float32) - 8).half()  # stored code → int4 value, for the kernel


def quantize_nf4(w: torch.Tensor, block: int = NF4_BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """Blocks of `block` values scaled by their absmax into [-1, 1], each rounded to the nearest NF4 level."""
    g = _grouped(w, block)
    absmax = g.abs().amax(dim=2).clamp_min(1e-12)
    normed = g / absmax[..., None]
    book = NF4_CODEBOOK.to(w.device)
    mids = (book[1:] + book[:-1]) / 2
    codes = torch.bucketize(normed.contiguous(), mids)
    return pack_nibbles(_ungrouped(codes, w.shape[1]).to(torch.uint8)), absmax.contiguous()


def dequantize_nf4(packed: torch.Tensor, absmax: torch.Tensor, block: int = NF4_BLOCK,
                   codebook: torch.Tensor | None = None) -> torch.Tensor:
    """`codebook`: the layer's copy on the weights' device (a host copy would break a graph capture)."""
    book = codebook if codebook is not None else NF4_CODEBOOK.to(packed.device)
    vals = book[unpack_nibbles(packed).long()]
    return _ungrouped(_grouped(vals, block) * absmax[..., None], vals.shape[1])
