from django.apps import AppConfig


class CourseappConfig(AppConfig):
    name = "courseapp"
    verbose_name = "Course"

    def ready(self) -> None:
        # Signal receivers (progress merge on login) and the Celery task registration.
        from . import signals, tasks  # noqa: F401
