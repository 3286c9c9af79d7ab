"""`python -m inference_core <command> …`: the engine from a shell, JSON out for scripts and tests."""
from __future__ import annotations

import argparse
import importlib

from .args import OneLineParser, check_arguments


def run(subcommands: list[tuple[str, str]], argv: list[str] | None = None) -> int:
    """Parse `argv` with one sub-command per (module, function adding its parser), check it, run it (the table is
    the entry point's, inference_core/__main__.py: this parser sits below the features)."""
    from ..model.weights import WeightsError

    parser = OneLineParser(prog="python -m inference_core", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for module, func in subcommands:
        getattr(importlib.import_module(module), func)(sub)
    args = parser.parse_args(argv)
    prog = f"{parser.prog} {args.command}"
    try:
        check_arguments(args)
        return args.func(args)
    except (ValueError, OSError, WeightsError) as exc:  # bad arguments, and what they name (a file, a format, a pack)
        parser.exit(2, f"{prog}: error: {' '.join(str(exc).split())}\n")
