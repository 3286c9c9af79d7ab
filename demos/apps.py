import threading

from django.apps import AppConfig


class Tokenizers:
    """The web process's tokenizers, one per model, read on first use and kept: vocabulary only (no weights, no
    torch), for counting a prompt's tokens when a run is validated. Thread-safe (Daphne's and Django's threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_model: dict = {}

    def get(self, model: str):
        with self._lock:
            if model not in self._by_model:
                from inference_core import load_tokenizer

                self._by_model[model] = load_tokenizer(model)
            return self._by_model[model]


class DemosConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "demos"
    verbose_name = "Live demos"

    def ready(self) -> None:
        self.tokenizers = Tokenizers()  # the web side's, owned by the app for the process's life
