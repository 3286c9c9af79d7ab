"""Build the native kernels now (`make test` does, before the suite) and say whether they are usable."""
import sys

from ...model.config import engine_settings
from . import load, why_unavailable

if __name__ == "__main__":
    if load(engine_settings()) is not None:
        print("quant kernels: built and loaded")
    else:
        print(f"quant kernels unavailable ({why_unavailable(engine_settings())}); PyTorch fallback in use", file=sys.stderr)
