from django.apps import AppConfig


class OpenAIApiConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "openai_api"
    verbose_name = "OpenAI-compatible API"
