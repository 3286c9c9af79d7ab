"""What every sub-command shares: a one-line-error parser, model/generation options, early checks."""
from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from ..model.config import DEFAULT_MODEL


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (no usage dump) and exits with code 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}; see --help\n")


class ArgumentError(ValueError):
    """A bad argument found after parsing (unknown model, missing file, out-of-range number)."""


def add_model_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help=f"model name (default: {DEFAULT_MODEL}; speed-llama-3.2-1b, speed-llama-3-8b: real shapes "
                             "with random weights, for speed only)")


def add_generation_args(parser: argparse.ArgumentParser) -> None:
    """--prompt, --max-new-tokens, the sampling options, --chat and --json: every generating sub-command's."""
    parser.add_argument("--prompt", required=True, help="the text to continue (with --chat: the user message)")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="tokens to generate at most (default: 32)")
    parser.add_argument("--temperature", type=float, default=0.0, help="sampling temperature; 0 = greedy (default)")
    parser.add_argument("--top-k", type=int, default=0, help="sample among the k likeliest tokens; 0 = all (default)")
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass in (0, 1]; 1 = off (default)")
    parser.add_argument("--seed", type=int, default=None, help="random seed for sampling (default: none)")
    parser.add_argument("--chat", action="store_true", help="apply the model's chat template")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


# --- Checking arguments before anything loads ------------------------------------------------------

def _at_least(low: float) -> Callable[[float], str | None]:
    return lambda v: None if v >= low else f"must be at least {low:g} (got {v:g})"


def _known_model(name: str) -> str | None:
    from ..model.speed_models import SPEED_ONLY_MODELS
    from ..model.weights import MODELS, is_installed

    if name in SPEED_ONLY_MODELS:
        return None
    if name not in MODELS:
        return f"unknown model {name!r}; known: {', '.join(sorted(MODELS))} (speed only, random weights: " \
               f"{', '.join(SPEED_ONLY_MODELS)})"
    if not is_installed(name):
        return f"model {name!r} is not installed: run {MODELS[name].install}"
    return None


def _known_draft(value: str) -> str | None:
    from ..speculative.drafts import DRAFT_KINDS

    kind, _, layer = value.partition(":")
    if kind == "ngram":
        return None if layer in ("", "1", "2", "3") else f"{value!r}: ngram:N needs N in 1..3"
    if kind in DRAFT_KINDS:
        if layer and not (kind == "self-early-exit" and layer.isascii() and layer.isdigit() and int(layer) > 0):
            return f"{value!r}: only self-early-exit takes a layer, as self-early-exit:L with L ≥ 1"
        return None
    problem = _known_model(value)
    return problem and f"{problem} (or a draft kind: {', '.join(DRAFT_KINDS)})"


def _known_formats(value: str) -> str | None:
    from ..quant.linears import parse_format

    try:
        for name in (value.split(",") if value else []):
            parse_format(name)
    except ValueError as exc:
        return str(exc)
    return None if value else "give at least one format"


def _readable_file(path: str) -> str | None:
    if not os.path.isfile(path):
        return f"{path!r} is not a file"
    if not os.access(path, os.R_OK):
        return f"{path!r} cannot be read"
    return None


# dest → check(value) returning a problem or None; applied to every sub-command that has the option.
CHECKS: dict[str, Callable] = {
    "model": _known_model,
    "draft": _known_draft,
    "quant": lambda v: _known_formats(v) if v else None,
    "formats": _known_formats,
    "prompts_file": _readable_file,
    **dict.fromkeys(("max_new_tokens", "new_tokens", "k", "block_size", "num_blocks", "max_num_seqs",
                     "max_num_batched_tokens"), _at_least(1)),
    "max_tokens": lambda v: None if v is None else _at_least(2)(v),
    "window": _at_least(2),
    **dict.fromkeys(("temperature", "top_k"), _at_least(0)),
    "top_p": lambda v: None if 0 < v <= 1 else f"must be in (0, 1] (got {v:g})",
}

def check_arguments(args: argparse.Namespace) -> None:
    """Raise ArgumentError naming the first bad option (as --its-name), before any model loads."""
    for dest, check in CHECKS.items():
        if not hasattr(args, dest):
            continue
        problem = check(getattr(args, dest))
        if problem:
            raise ArgumentError(f"--{dest.replace('_', '-')}: {problem}")
