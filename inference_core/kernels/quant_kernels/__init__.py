"""The AVX2 CPU kernels, compiled on first use with torch.utils.cpp_extension: the low-bit GEMV ops
(gemv.cpp) and the fused whole-step forward (step.cpp), sharing the row kernels of linear.h.

`load(settings)` returns the compiled module, or None when it cannot be built or run here (no compiler, no AVX2,
INFERENCE_QUANT_KERNELS=torch set): callers then fall back to dequantize-then-matmul in PyTorch, which
gives the same numbers, only slower. `why_unavailable(settings)` says why, for reports and the demo page.
The build lands in the inference-lab cache (~/.cache/inference-lab/torch_extensions), keyed by the
source's hash, so a changed kernel rebuilds and an unchanged one loads in milliseconds.

Builders serialize on an flock the kernel drops when a process dies. torch's own build lock is a plain file
that a killed build (a worker stopped mid-compile, a timed-out CI run) leaves behind, and every later build
then waits on it forever; under our flock any such file is stale and is removed.
`python -m inference_core.kernels.quant_kernels` builds ahead of time and says whether the kernels are usable.
"""
from __future__ import annotations

import fcntl
import hashlib
import sys
import threading
from pathlib import Path
from types import ModuleType

_HERE = Path(__file__).parent
_SOURCES = [_HERE / "gemv.cpp", _HERE / "step.cpp"]
_HEADERS = [_HERE / "linear.h", _HERE / "int_dot.h"]
_build_lock = threading.Lock()  # two threads of one process never build at once (the flock orders processes)
# Where this process keeps the outcome of its one load: Python's own table of loaded modules, which owns the
# extension module as it owns every imported one, so no module of ours keeps it. The compiled module is registered
# as this package's submodule (`import inference_core.kernels.quant_kernels.compiled` then finds it); a build that
# failed here is registered as an `Unavailable` stand-in carrying the reason, so it is not tried again.
COMPILED = f"{__name__}.compiled"


class Unavailable(ModuleType):
    """What `COMPILED` names when this process has no kernels: the reason, in place of the module."""

    def __init__(self, reason: str) -> None:
        super().__init__(COMPILED, f"quant kernels unavailable: {reason}")
        self.reason = reason


def load(settings) -> ModuleType | None:
    """The compiled kernels, built (or loaded from the cache) once per process; None when unavailable (see
    `why_unavailable`). `settings`: the engine's (`model.config.engine_settings()`, passed in by the caller so
    that this loader imports nothing of the engine and the quantized layers above it stay one level up). Called
    per quantized matmul: after the first call, one dictionary lookup."""
    if not settings.quant_kernels:
        return None
    loaded = sys.modules.get(COMPILED)
    if loaded is None:
        with _build_lock:
            loaded = sys.modules.get(COMPILED)
            if loaded is None:
                loaded = sys.modules[COMPILED] = _load_once(settings)
    return None if type(loaded) is Unavailable else loaded


def why_unavailable(settings) -> str:
    """"" when `load(settings)` gives the kernels, else why not (for reports and the demo page)."""
    if not settings.quant_kernels:
        return "disabled by INFERENCE_QUANT_KERNELS=torch"
    return "" if load(settings) is not None else sys.modules[COMPILED].reason


def _load_once(settings) -> ModuleType:
    """The compiled module, or a stand-in that says why there is none."""
    from ..onednn_linears import cpu_flags

    if not {"avx2", "fma", "f16c"} <= cpu_flags():
        reason = "CPU lacks AVX2/FMA/F16C"
    else:
        try:
            return _build(settings.cache_dir)
        except Exception as exc:  # compiler missing, headers missing, link error…
            reason = f"build failed: {type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
    return Unavailable(reason)


def _build(cache_dir: Path) -> ModuleType:
    from torch.utils.cpp_extension import load as cpp_load

    import torch

    # Keyed on the sources and on the torch install that builds them: torch rebuilds an extension whose build
    # file names other include paths, so two checkouts (two venvs) sharing the cache kept rebuilding each
    # other's copy, and a worker started after the other checkout's build compiled again at its warm-up.
    where = str(Path(torch.__file__).parent).encode()  # as the build file names it (not resolved)
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in _SOURCES + _HEADERS) + where).hexdigest()[:12]
    build_dir = cache_dir / "torch_extensions" / f"quant_gemv_{digest}"
    build_dir.mkdir(parents=True, exist_ok=True)
    with open(build_dir.with_name(build_dir.name + ".flock"), "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # released by the kernel if this process dies
        (build_dir / "lock").unlink(missing_ok=True)  # torch's lock: stale, since its holder held ours
        return cpp_load(
            name=f"quant_gemv_{digest}",
            sources=[str(p) for p in _SOURCES],
            extra_cflags=["-O3", "-mavx2", "-mfma", "-mf16c", "-fopenmp"],
            extra_ldflags=["-fopenmp"],
            build_directory=str(build_dir),
            verbose=False,
        )
