from django.urls import path

from . import views

app_name = "exercises"

urlpatterns = [
    path("", views.exercise_index, name="index"),
    path("runs/<uuid:submission_id>/", views.run_status, name="run_status"),
    path("<slug:exercise_id>/", views.exercise_page, name="page"),
    path("<slug:exercise_id>/run/", views.run, name="run"),
]
