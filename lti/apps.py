from django.apps import AppConfig


class LtiConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "lti"
    verbose_name = "LTI 1.3 tool"
    default = True

    def ready(self) -> None:
        from . import practice_scores, scores  # noqa: F401  (connect the signals that post scores back)


class PlatformRegistrationsConfig(AppConfig):
    """The library's registration models (`pylti1p3`'s lti1p3_tool_config), with the key type its own
    migration made: without this, the project's BigAutoField default would ask for a migration inside it."""

    name = "pylti1p3.contrib.django.lti1p3_tool_config"
    label = "lti1p3_tool_config"
    verbose_name = "LTI 1.3 platform registrations"
    default_auto_field = "django.db.models.AutoField"
    default = False
