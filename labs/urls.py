from django.urls import path

from . import views

app_name = "labs"

urlpatterns = [
    path("<slug:slug>/<slug:lab_id>/table", views.table, name="table"),
    path("<slug:slug>/<slug:lab_id>/answers", views.answers, name="answers"),
    path("<slug:slug>/<slug:lab_id>/submit", views.submit, name="submit"),
]
