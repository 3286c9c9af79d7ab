from django.apps import AppConfig


class NarrationConfig(AppConfig):
    name = "narration"
    verbose_name = "Narration"
