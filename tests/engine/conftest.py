"""LoadedModel fixtures: the real SmolLM2 engine, the transformers reference on the same GGUF, a tiny model."""
from __future__ import annotations

import pytest
import torch
from engine_reference import hf_reference


@pytest.fixture(scope="session")
def engine(loaded_models):
    return loaded_models.get("smollm2-135m", device="cpu")


@pytest.fixture(scope="session")
def hf_model():
    return hf_reference()


@pytest.fixture(scope="session")
def hf_tokenizer():
    from transformers import AutoTokenizer

    from inference_core.model.weights import MODELS, gguf_path

    path = gguf_path(MODELS["smollm2-135m"])
    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


@pytest.fixture
def tiny_model():
    from engine_reference import tiny_config
    from inference_core.model.loader import build_model

    return build_model(tiny_config(), None, torch.device("cpu"))


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for modules of many small matmuls: faster here, and immune to a busy CPU
    (bench/omp_threads.py). Restored afterwards."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
