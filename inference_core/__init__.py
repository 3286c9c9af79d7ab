"""Inference Lab's engine: a Llama-family model in plain PyTorch that explains itself with trace events."""
import os

# OpenMP threads that spin while waiting at a barrier steal the core a descheduled sibling needs: on this
# 2-core machine, shared with Daphne, Redis and the browser, decode ran at 4 tok/s with the default
# (spinning) policy and 23 tok/s with PASSIVE. It must be set before torch loads OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .config import ModelConfig  # noqa: E402
from .engine import Engine, GenerationParams, load_engine
from .tokenizer import load_tokenizer
from .trace import SCHEMA_VERSION, validate_event

__all__ = ["Engine", "GenerationParams", "ModelConfig", "SCHEMA_VERSION", "load_engine", "load_tokenizer",
           "validate_event"]
