"""`python -m inference_core <command> …`: the entry point, holding the table of sub-commands."""
import os
import sys

from .cli.main import run

# Each feature module contributes one sub-command: (module, function that adds its parser).
SUBCOMMANDS: list[tuple[str, str]] = [
    ("inference_core.cli.generate", "add_generate"),
    ("inference_core.quant.report", "add_quantize_report"),
    ("inference_core.cli.speculate", "add_speculate"),
    ("inference_core.cli.batch", "add_batch"),
]


def main(argv: list[str] | None = None) -> int:
    return run(SUBCOMMANDS, argv)


if __name__ == "__main__":
    # A process starts here, so its process-wide settings are set here, before torch loads OpenMP (engine-notes)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    sys.exit(main())
