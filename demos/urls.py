from django.urls import path

from . import views

app_name = "demos"

urlpatterns = [
    path("", views.demo_index, name="index"),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("runs/<uuid:run_id>/events.json", views.run_events, name="run_events"),
    path("<slug:name>/", views.demo_page, name="demo"),
]
