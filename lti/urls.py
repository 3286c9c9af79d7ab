from django.urls import path

from . import canvas_config, registration, roster_views, score_views, views

app_name = "lti"

urlpatterns = [
    path("jwks/", views.jwks, name="jwks"),
    path("canvas.json", canvas_config.canvas_json, name="canvas_json"),
    path("register/<str:token>/", registration.register, name="register"),
    path("login/", views.login_initiation, name="login"),
    path("launch/", views.launch, name="launch"),
    path("deep-link/", views.deep_link_return, name="deep_link_return"),
    path("cohorts/<int:cohort_id>/scores/<int:post_id>/resend/", score_views.resend, name="score_resend"),
    path("cohorts/<int:cohort_id>/roster/sync/", roster_views.sync, name="roster_sync"),
]
