from django.contrib import admin
from django.urls import include, path

from .login_throttle import ThrottledLoginView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("demos/", include("demos.urls")),
    path("", include("courseapp.urls")),
]
