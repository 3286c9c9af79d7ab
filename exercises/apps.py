from django.apps import AppConfig


class ExercisesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "exercises"
    verbose_name = "Code exercises (sandboxed tests)"

    def ready(self) -> None:
        # The live run a passing sampler drives: started on the demo socket, never listed as a demo of its own.
        from demos.registry import STARTED_ELSEWHERE

        from .live_run import SPEC

        STARTED_ELSEWHERE[SPEC.name] = SPEC
