"""Instructors only: every path is under /author/, as before the split (bookmarks and docs keep working)."""
from django.urls import path
from django.views.generic import RedirectView

from . import images, revisions, transfer_views, views

app_name = "authoring"

urlpatterns = [
    path("author/", views.module_list, name="list"),
    path("author/new/", views.module_edit, name="create"),
    path("author/preview/", views.preview, name="preview"),
    path("author/reference/", views.reference, name="reference"),
    path("author/export/", transfer_views.export, name="export"),
    path("author/export.zip", transfer_views.export_zip, name="export_zip"),
    path("author/import/", transfer_views.import_zip, name="import"),
    path("author/import/review/", transfer_views.import_review_page, name="import_review"),
    path("author/import/confirm/", transfer_views.import_confirm, name="import_confirm"),
    path("author/import/cancel/", transfer_views.import_cancel, name="import_cancel"),
    path("author/<slug:slug>/", views.module_edit, name="edit"),
    path("author/<slug:slug>/publish/", views.module_publish, name="publish"),
    path("author/<slug:slug>/move/", views.module_move, name="move"),
    path("author/<slug:slug>/delete/", views.module_delete, name="delete"),
    path("author/<slug:slug>/undelete/", views.module_undelete, name="undelete"),
    path("author/<slug:slug>/draft/discard/", views.discard_draft, name="discard_draft"),
    path("author/<slug:slug>/conflict/", views.resolve_conflict, name="resolve_conflict"),
    path("author/<slug:slug>/images/", images.image_upload, name="image_upload"),
    path("author/<slug:slug>/images/<str:name>", images.author_image_file, name="image"),
    path("author/<slug:slug>/history/", revisions.module_history, name="history"),
    path("author/<slug:slug>/history/diff/", revisions.module_diff, name="diff"),
    path("author/<slug:slug>/history/<int:revision_id>/restore/", revisions.module_restore, name="restore"),
    path("author/<slug:slug>/narration/", views.narration_status, name="narration_status"),
    path("author/<slug:slug>/narration/generate/", views.narration_generate, name="narrate"),
    path("author/<slug:slug>/narration/upload/", views.narration_upload, name="upload"),
    path("author/<slug:slug>/narration/caption/", views.narration_caption, name="caption"),
    # The class dashboard moved to the classes app; old links and bookmarks (with their date range) still work.
    path("author/<slug:slug>/class/", RedirectView.as_view(pattern_name="classes:module_dashboard",
                                                           query_string=True, permanent=True), name="class"),
    path("author/<slug:slug>/class.csv", RedirectView.as_view(pattern_name="classes:module_dashboard_csv",
                                                              query_string=True, permanent=True), name="class_csv"),
]
