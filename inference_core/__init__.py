"""Inference Lab's engine: a Llama-family model in plain PyTorch that explains itself with trace events."""
from .config import ModelConfig
from .engine import Engine, GenerationParams, load_engine
from .tokenizer import load_tokenizer
from .trace import SCHEMA_VERSION, validate_event

__all__ = ["Engine", "GenerationParams", "ModelConfig", "SCHEMA_VERSION", "load_engine", "load_tokenizer",
           "validate_event"]
