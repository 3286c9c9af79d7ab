from django.apps import AppConfig


class ServerProfileConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "serverprofile"
    verbose_name = "This server's profile"

    def ready(self) -> None:
        # The worker_ready receiver that measures and publishes the profile (only ever fires in a Celery worker).
        from . import worker  # noqa: F401
