from django.urls import path

from . import views

app_name = "demos"

urlpatterns = [
    path("", views.demo_index, name="index"),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("visitor/", views.visitor, name="visitor"),
    path("runs/<uuid:run_id>/events.json", views.run_events, name="run_events"),
    path("runs/mine.json", views.my_runs, name="my_runs"),
    path("runs/<str:share_id>/", views.shared_run, name="shared_run"),
    path("runs/<str:share_id>/run.json", views.shared_run_json, name="shared_run_json"),
    path("<slug:name>/", views.demo_page, name="demo"),
]
