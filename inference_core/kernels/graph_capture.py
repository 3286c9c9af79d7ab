"""Recording one step as a CUDA graph: the capture of every paged step graph (paged_graphs.py)."""
from __future__ import annotations

import threading
from typing import Callable, TypeVar

import torch

T = TypeVar("T")
# One capture at a time in the process: the worker's threads (the batching service, single runs, speculative runs)
# may each lend a new pool and capture over it, and a capture records whatever its stream launches.
_capture_lock = threading.Lock()


def capture(step: Callable[[], T]) -> tuple["torch.cuda.CUDAGraph", T]:
    """`step` recorded as a CUDA graph (not run), with the output tensors its replays overwrite."""
    with _capture_lock:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                step()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            out = step()
    return graph, out
