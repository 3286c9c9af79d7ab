"""An instructor's unpublished changes to a published module (the content models are courseapp's).

The model lived in courseapp until the authoring app was split off; it keeps its table (`courseapp_moduledraft`)
and its rows.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models

from courseapp.models import Module


class ModuleDraft(models.Model):
    """Saved, unpublished changes to a published module: students keep seeing the module as it is until an
    instructor publishes the draft (it becomes the module, a new revision) or discards it. One per module."""

    module = models.OneToOneField(Module, on_delete=models.CASCADE, related_name="pending_draft")
    front_matter = models.JSONField(help_text="As `loader.authored` gives it: title, slug, track slug, order, …")
    source = models.TextField(blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "courseapp_moduledraft"  # the table it had in courseapp, kept (migration authoring 0001)

    def __str__(self) -> str:
        return f"Unpublished changes to {self.module}"
