from django.apps import AppConfig


class ClassesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "classes"
    verbose_name = "Classes (cohorts, due dates, gradebook)"

    def ready(self) -> None:
        from . import membership  # noqa: F401  (connects the signals that keep its cache right)
