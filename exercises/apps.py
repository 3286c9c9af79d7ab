from django.apps import AppConfig


class ExercisesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "exercises"
    verbose_name = "Code exercises (sandboxed tests)"

    def ready(self) -> None:
        # The live runs a passing sampler or draft drives: started on the demo socket, no page lists them.
        from demos.registry import STARTED_ELSEWHERE

        from . import live_draft, live_run

        for spec in (live_run.SPEC, live_draft.SPEC):
            STARTED_ELSEWHERE[spec.name] = spec
