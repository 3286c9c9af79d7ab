"""What a demo runner is handed to reach the engine: its caller's loaded models (in a worker, the worker's
`workers.serving.LoadedModels`; in a test session or a bench script, one of their own), so a second run finds the
weights loaded and the batching service running."""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from inference_core import LoadedModel


class Models(Protocol):
    def get(self, name: str = ..., device: str | None = None) -> LoadedModel:
        """Model `name` on `device`, loaded on first ask."""

    def service(self, name: str = ...):
        """The batching service of model `name` (its `generate_events` as `LoadedModel`'s), started on first ask."""
