from django.apps import AppConfig


class ServerProfileConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "serverprofile"
    verbose_name = "This server's profile"
