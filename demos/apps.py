from django.apps import AppConfig


class DemosConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "demos"
    verbose_name = "Live demos"
