from django.contrib import admin
from django.urls import include, path

from courseapp.password_reset import PrivatePasswordResetView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/password_reset/", PrivatePasswordResetView.as_view(), name="password_reset"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("demos/", include("demos.urls")),
    path("labs/", include("labs.urls")),
    path("classes/", include("classes.urls")),
    path("exercises/", include("exercises.urls")),
    path("lti/", include("lti.urls")),
    path("", include("openai_api.urls")),  # /v1/… (the OpenAI-compatible API) and /account/api-keys/
    path("", include("authoring.urls")),
    path("", include("narration.urls")),
    path("", include("search.urls")),
    path("", include("courseapp.urls")),
]
