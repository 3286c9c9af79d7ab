from django.apps import AppConfig


class CourseappConfig(AppConfig):
    name = "courseapp"
    verbose_name = "Course"

    def ready(self) -> None:
        # Signal receivers (progress merge on login). The narration tasks run in workers/narration.py.
        from . import signals  # noqa: F401
