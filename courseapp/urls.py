from django.http import HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import path

from . import demo_cues, image_views, views

app_name = "courseapp"


def favicon(request):
    """Browsers and tools that ask for /favicon.ico directly: the site's SVG icon (pages link it in <head>);
    resolved per request, so a hashed static storage is asked only once it is built."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))


urlpatterns = [
    path("", views.course_index, name="index"),
    path("favicon.ico", favicon, name="favicon"),
    path("modules/<slug:slug>/", views.module_detail, name="module"),
    path("modules/<slug:slug>/quiz/", views.quiz_submit, name="quiz"),
    path("modules/<slug:slug>/complete/", views.module_complete, name="complete"),
    path("modules/<slug:slug>/place/", views.save_place, name="place"),
    path("modules/<slug:slug>/narration/", views.narration_state, name="narration_state"),
    path("modules/<slug:slug>/images/<str:name>", image_views.image_file, name="module_image"),
    path("runs/<slug:demo>.json", demo_cues.reference_run_json, name="reference_run"),
    path("preferences/", views.preferences, name="preferences"),
    path("accounts/signup/", views.signup, name="signup"),
]
