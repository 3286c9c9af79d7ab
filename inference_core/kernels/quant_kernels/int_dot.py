"""Which arithmetic the fused CPU step uses for int8 and int4 weights: "vnni" (AVX-512 VNNI integer dot products,
int_dot.h), "avx2" (the same integer sums on vpmaddubsw, int_dot_avx2.h) or "float" (linear.h's weight-only kernels).
INFERENCE_INT_DOT = auto (default: vnni where the CPU has it, else avx2), vnni, avx2 or float; the paths, their
arithmetic and figures: docs/deploy.md, "CPU hosts: int8 and int4 on integer dot products"."""
from __future__ import annotations

CHOICES = ("auto", "vnni", "avx2", "float")


def choose(kernels, settings) -> tuple[str, str]:
    """(path, why): the path a fused step built now takes on this CPU under `settings`."""
    wanted = settings.int_dot
    if wanted not in CHOICES:
        raise ValueError(f"INFERENCE_INT_DOT={wanted!r}: expected one of {', '.join(CHOICES)}")
    if wanted in ("float", "avx2"):
        return wanted, f"INFERENCE_INT_DOT={wanted}"
    if not kernels.cpu_has_avx512_vnni():
        return "avx2", "this CPU lacks AVX-512 VNNI"
    return "vnni", "AVX-512 VNNI" if wanted == "auto" else "INFERENCE_INT_DOT=vnni"
