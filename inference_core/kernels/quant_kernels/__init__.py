"""The AVX2 CPU kernels (gemv.cpp: the low-bit GEMV ops; step.cpp: the fused whole-step forward; both on linear.h's
row kernels), compiled on first use. `load(settings)` returns the module, or None when it cannot be built or run
here: callers then fall back to PyTorch (the same numbers, slower); `why_unavailable(settings)` says why. Builds are
keyed by the sources' hash and serialize on an flock (docs/engine-notes.md). `python -m
inference_core.kernels.quant_kernels` builds ahead of time and says whether the kernels are usable."""
from __future__ import annotations

import fcntl
import hashlib
import sys
import threading
from pathlib import Path
from types import ModuleType

_HERE = Path(__file__).parent
_SOURCES = [_HERE / "gemv.cpp", _HERE / "step.cpp"]
_HEADERS = sorted(_HERE.glob("*.h"))  # all of them: a changed header rebuilds
_build_lock = threading.Lock()  # two threads of one process never build at once (the flock orders processes)
# The process's one load outcome lives in sys.modules (which owns it, not a module of ours): the compiled module as
# this package's submodule, or an `Unavailable` stand-in with the reason, so a failed build is not tried again.
COMPILED = f"{__name__}.compiled"


class Unavailable(ModuleType):
    """What `COMPILED` names when this process has no kernels: the reason, in place of the module."""

    def __init__(self, reason: str) -> None:
        super().__init__(COMPILED, f"quant kernels unavailable: {reason}")
        self.reason = reason


def _cpu_has_avx2() -> bool:
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return all(f" {f}" in info for f in ("avx2", "fma", "f16c"))


def load(settings) -> ModuleType | None:
    """The compiled kernels, built (or loaded from the cache) once per process; None when unavailable. `settings`:
    the engine's, passed in so this loader imports nothing of the engine. After the first call, one dict lookup."""
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
    if not _cpu_has_avx2():
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
