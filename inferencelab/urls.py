from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("demos/", include("demos.urls")),
    path("classes/", include("classes.urls")),
    path("lti/", include("lti.urls")),
    path("", include("authoring.urls")),
    path("", include("narration.urls")),
    path("", include("search.urls")),
    path("", include("courseapp.urls")),
]
