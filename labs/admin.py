"""Labs in the admin: each attempt's answers (the free "what moved, why" ones are read here until the class
dashboard shows them), its grade and the table it was graded against; read-only, as students wrote them."""
from django.contrib import admin

from .models import Lab, LabAttempt


@admin.register(LabAttempt)
class LabAttemptAdmin(admin.ModelAdmin):
    list_display = ("module", "lab_key", "user", "visitor", "score", "submitted_at", "updated_at")
    list_filter = ("module", "lab_key")
    search_fields = ("user__username", "visitor", "lab_key")
    readonly_fields = [f.name for f in LabAttempt._meta.fields]


@admin.register(Lab)
class LabAdmin(admin.ModelAdmin):
    """Derived from the module's Markdown on every save: edit the lesson, not these rows."""

    list_display = ("module", "key", "order")
    readonly_fields = ("module", "key", "order", "definition")
