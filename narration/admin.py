from django.contrib import admin

from .models import Narration


@admin.register(Narration)
class NarrationAdmin(admin.ModelAdmin):
    list_display = ("module", "status", "origin", "progress", "duration", "updated_at")
    list_filter = ("status", "origin")
    # Files change only through the authoring page, which checks audio by its bytes and cues as WebVTT
    # and stores them under server-chosen names (narration/files.py).
    readonly_fields = ("audio", "vtt", "progress", "cue_hash", "voice", "task_id", "error", "updated_at")
