"""A roofline predictor: a kernel's time is its FLOPs at peak compute or its bytes at peak bandwidth, whichever is
longer; a decode step reads every weight once."""
from __future__ import annotations

from .base import Case, Exercise, call

PROMPT = """\
The **roofline model** predicts a kernel's time from two numbers: the floating-point operations it does and the
bytes it moves to and from memory. At best it computes at `peak_flops` (FLOP/s) and moves data at `bandwidth`
(bytes/s), and it cannot be faster than either allows.

**1.** `roofline(flops, bytes_moved, peak_flops, bandwidth)` returns a dict:

* `"seconds"`: the predicted time, the larger of the compute time and the memory time;
* `"bound"`: `"memory"` when the memory time is at least the compute time, else `"compute"`;
* `"intensity"`: the kernel's arithmetic intensity, FLOPs per byte;
* `"ridge"`: the machine's ridge point, `peak_flops / bandwidth`: the intensity above which a kernel is
  compute-bound.

**2.** `decode_step_seconds(n_params, bytes_per_param, batch_size, peak_flops, bandwidth)`: the predicted time of
one decode step that reads every weight once (`n_params * bytes_per_param` bytes; ignore the KV cache) and does
2 FLOPs per weight for each sequence in the batch.

An H100 SXM does about 989 TFLOP/s in bf16 and moves 3.35 TB/s: a batch-1 decode step of an 8B-parameter bf16 model
reads 16 GB and is memory-bound (~4.8 ms); at batch 512 its FLOPs take longer than its bytes.
"""

STARTER = '''\
def roofline(flops, bytes_moved, peak_flops, bandwidth):
    """Predicted seconds, what bounds them, the kernel's FLOP/byte and the machine's ridge point."""
    seconds = flops / peak_flops  # TODO: a kernel can also wait on memory
    return {"seconds": seconds, "bound": "compute", "intensity": flops / bytes_moved, "ridge": 0.0}


def decode_step_seconds(n_params, bytes_per_param, batch_size, peak_flops, bandwidth):
    """One decode step: every weight read once, 2 FLOPs per weight per sequence."""
    raise NotImplementedError
'''

REFERENCE = '''\
def roofline(flops, bytes_moved, peak_flops, bandwidth):
    compute, memory = flops / peak_flops, bytes_moved / bandwidth
    return {"seconds": max(compute, memory), "bound": "memory" if memory >= compute else "compute",
            "intensity": flops / bytes_moved, "ridge": peak_flops / bandwidth}


def decode_step_seconds(n_params, bytes_per_param, batch_size, peak_flops, bandwidth):
    return roofline(2 * n_params * batch_size, n_params * bytes_per_param, peak_flops, bandwidth)["seconds"]
'''

ROOF, DECODE = "roofline", "decode_step_seconds"
H100 = (989e12, 3.35e12)
A100 = (312e12, 2.039e12)
REL = 1e-6  # the answers are floats: relative tolerance


def result(seconds: float, bound: str, intensity: float, ridge: float) -> dict:
    return {"seconds": seconds, "bound": bound, "intensity": intensity, "ridge": ridge}


MATMUL_FLOPS, MATMUL_BYTES = 2 * 4096**3, 3 * 4096**2 * 2  # C = A @ B, 4096², bf16: read A and B, write C

CASES = (
    Case("a 4096² bf16 matmul on an H100 is compute-bound", call(ROOF, MATMUL_FLOPS, MATMUL_BYTES, *H100),
         result(MATMUL_FLOPS / H100[0], "compute", MATMUL_FLOPS / MATMUL_BYTES, H100[0] / H100[1]), rel_tol=REL),
    Case("a matrix-vector product (1 FLOP per byte) is memory-bound", call(ROOF, 16e9, 16e9, *H100),
         result(16e9 / H100[1], "memory", 1.0, H100[0] / H100[1]), rel_tol=REL,
         hint="The time is the larger of flops / peak_flops and bytes_moved / bandwidth."),
    Case("exactly at the ridge counts as memory-bound", call(ROOF, 100.0, 10.0, 10.0, 1.0),
         result(10.0, "memory", 10.0, 10.0), rel_tol=REL),
    Case("8B bf16 decode at batch 1 on an H100", call(DECODE, 8e9, 2, 1, *H100), 16e9 / H100[1], rel_tol=REL),
    Case("8B bf16 decode at batch 512 on an H100", call(DECODE, 8e9, 2, 512, *H100), 2 * 8e9 * 512 / H100[0],
         rel_tol=REL, hint="At batch 512 the FLOPs (2 per weight per sequence) take longer than the bytes."),
    Case("hidden 1", call(ROOF, 1e12, 1e10, *A100), result(1e10 / A100[1], "memory", 100.0, A100[0] / A100[1]),
         rel_tol=REL, hidden=True),
    Case("hidden 2", call(ROOF, 0.0, 1e9, 1e12, 1e11), result(0.01, "memory", 0.0, 10.0), rel_tol=REL,
         hidden=True),
    Case("hidden 3", call(DECODE, 70e9, 0.5, 1, *H100), 35e9 / H100[1], rel_tol=REL, hidden=True),
    Case("hidden 4", call(DECODE, 7e9, 2, 64, *A100), 14e9 / A100[1], rel_tol=REL, hidden=True),
    Case("hidden 5", call(DECODE, 135e6, 4, 1, 1e12, 50e9), 5.4e8 / 50e9, rel_tol=REL, hidden=True),
    Case("hidden 6", call(DECODE, 7e9, 2, 256, *A100), 2 * 7e9 * 256 / A100[0], rel_tol=REL, hidden=True),
)

EXERCISE = Exercise(
    id="roofline", title="A roofline predictor", prompt=PROMPT, starter=STARTER, reference=REFERENCE, cases=CASES,
    functions=(ROOF, DECODE),
    summary="Predict a kernel's time from its FLOPs and bytes, and a decode step's from its weights and batch.")
