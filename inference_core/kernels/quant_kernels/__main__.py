"""Build the native kernels now (`make test` does, before the suite) and say whether they are usable."""
import sys

from . import load, why_unavailable

if __name__ == "__main__":
    if load() is not None:
        print("quant kernels: built and loaded")
    else:
        print(f"quant kernels unavailable ({why_unavailable()}); PyTorch fallback in use", file=sys.stderr)
