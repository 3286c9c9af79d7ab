"""Which arithmetic the fused CPU step uses for int8 and int4 weights, chosen from the CPU's features.

- "vnni": integer dot products on AVX-512 VNNI (int_dot.h): the activations are quantized per block of 32 to int8
  (as llama.cpp's Q8 activations are), multiplied with the weight codes in int32, then scaled in fp32. Its
  reference is tests/engine/activation_blocks.py.
- "avx2": the same arithmetic on AVX2's vpmaddubsw (int_dot_avx2.h), for CPUs without VNNI (AMD Zen 2/3, older
  Intel): the integer sums are the same, only the fp32 summation order differs.
- "float": the weight-only kernels of linear.h (codes widened to fp32, fp32 multiply-adds; activations exact).

INFERENCE_INT_DOT = auto (vnni where the CPU has it, else avx2; AVX-VNNI-only CPUs too), vnni, avx2 or float:
forcing lets the tests run every path the CPU can; vnni on a CPU without it takes avx2 and says why."""
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
