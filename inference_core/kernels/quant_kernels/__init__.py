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
import threading
from pathlib import Path
from types import ModuleType

_HERE = Path(__file__).parent
_SOURCES = [_HERE / "gemv.cpp", _HERE / "step.cpp"]
_HEADERS = [_HERE / "linear.h", _HERE / "int_dot.h"]
_lock = threading.Lock()
_state: dict[str, object] = {}


def _cpu_has_avx2() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return all(f" {f}" in flags for f in ("avx2", "fma", "f16c"))


def load(settings) -> ModuleType | None:
    """The compiled kernels, built once per source version; None (with a reason) when unavailable. `settings`: the
    engine's (`model.config.engine_settings()`, passed in by the caller so that this loader imports nothing of the
    engine and the quantized layers above it stay one level up)."""
    with _lock:
        if "module" in _state:
            return _state["module"]  # type: ignore[return-value]
        module, reason = None, ""
        if not settings.quant_kernels:
            reason = "disabled by INFERENCE_QUANT_KERNELS=torch"
        elif not _cpu_has_avx2():
            reason = "CPU lacks AVX2/FMA/F16C"
        else:
            try:
                module = _build(settings.cache_dir)
            except Exception as exc:  # compiler missing, headers missing, link error…
                reason = f"build failed: {type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
        _state["module"], _state["reason"] = module, reason
        return module


def why_unavailable(settings) -> str:
    load(settings)
    return str(_state.get("reason", ""))


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
