"""The engine's source version, as runs, replay keys and machine profiles record it (web side and worker alike)."""
from __future__ import annotations

import hashlib
import importlib.util
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def engine_version() -> str:
    """A hash of the engine's source files (Python and kernels): changes whenever the engine does."""
    spec = importlib.util.find_spec("inference_core")
    if spec is None or not spec.submodule_search_locations:
        return "unavailable"
    root = Path(next(iter(spec.submodule_search_locations)))
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in {".py", ".cpp", ".h", ".json"} and p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]
