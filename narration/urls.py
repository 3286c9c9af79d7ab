from django.urls import path

from . import media

app_name = "narration"

urlpatterns = [
    path("narration/<path:path>", media.narration_media, name="media"),
]
