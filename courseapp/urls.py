from django.http import HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import path
from django.views.generic import RedirectView

from . import authoring, demo_cues, image_views, media, revisions, search, views

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
    path("search/", search.search_view, name="search"),
    path("preferences/", views.preferences, name="preferences"),
    path("accounts/signup/", views.signup, name="signup"),
    path("narration/<path:path>", media.narration_media, name="narration_media"),
    # Instructors only.
    path("author/", authoring.module_list, name="author_list"),
    path("author/new/", authoring.module_edit, name="author_create"),
    path("author/preview/", authoring.preview, name="author_preview"),
    path("author/reference/", authoring.reference, name="author_reference"),
    path("author/export/", authoring.export, name="author_export"),
    path("author/export.zip", authoring.export_zip, name="author_export_zip"),
    path("author/import/", authoring.import_zip, name="author_import"),
    path("author/import/review/", authoring.import_review_page, name="author_import_review"),
    path("author/import/confirm/", authoring.import_confirm, name="author_import_confirm"),
    path("author/import/cancel/", authoring.import_cancel, name="author_import_cancel"),
    path("author/<slug:slug>/", authoring.module_edit, name="author_edit"),
    path("author/<slug:slug>/publish/", authoring.module_publish, name="author_publish"),
    path("author/<slug:slug>/move/", authoring.module_move, name="author_move"),
    path("author/<slug:slug>/delete/", authoring.module_delete, name="author_delete"),
    path("author/<slug:slug>/undelete/", authoring.module_undelete, name="author_undelete"),
    path("author/<slug:slug>/draft/discard/", authoring.discard_draft, name="author_discard_draft"),
    path("author/<slug:slug>/conflict/", authoring.resolve_conflict, name="author_resolve_conflict"),
    path("author/<slug:slug>/images/", image_views.image_upload, name="author_image_upload"),
    path("author/<slug:slug>/images/<str:name>", image_views.author_image_file, name="author_image"),
    path("author/<slug:slug>/history/", revisions.module_history, name="author_history"),
    path("author/<slug:slug>/history/diff/", revisions.module_diff, name="author_diff"),
    path("author/<slug:slug>/history/<int:revision_id>/restore/", revisions.module_restore, name="author_restore"),
    path("author/<slug:slug>/narration/", authoring.narration_status, name="author_narration_status"),
    path("author/<slug:slug>/narration/generate/", authoring.narration_generate, name="author_narrate"),
    path("author/<slug:slug>/narration/upload/", authoring.narration_upload, name="author_upload"),
    path("author/<slug:slug>/narration/caption/", authoring.narration_caption, name="author_caption"),
    # The class dashboard moved to the classes app; old links and bookmarks (with their date range) still work.
    path("author/<slug:slug>/class/", RedirectView.as_view(pattern_name="classes:module_dashboard",
                                                           query_string=True, permanent=True), name="author_class"),
    path("author/<slug:slug>/class.csv", RedirectView.as_view(pattern_name="classes:module_dashboard_csv",
                                                              query_string=True, permanent=True),
         name="author_class_csv"),
]
