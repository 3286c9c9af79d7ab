from django.apps import AppConfig


class SearchConfig(AppConfig):
    name = "search"
    verbose_name = "Search"

    def ready(self) -> None:
        # The index follows module saves and deletes.
        from . import signals  # noqa: F401
