"""Platform registrations and the tool key are edited through the library's admin (`LtiTool`, `LtiToolKey`);
these pages show what launches left behind, and score posts still owed."""
from django.contrib import admin

from .models import Context, Embedding, Identity, ResourceLink, ScorePost


@admin.register(Identity)
class IdentityAdmin(admin.ModelAdmin):
    list_display = ["subject", "issuer", "user", "created_at"]
    search_fields = ["subject", "user__username"]


@admin.register(Context)
class ContextAdmin(admin.ModelAdmin):
    list_display = ["title", "context_id", "platform", "deployment_id", "cohort"]


@admin.register(ResourceLink)
class ResourceLinkAdmin(admin.ModelAdmin):
    list_display = ["resource_link_id", "module", "context"]
    exclude = ["launched_by"]


@admin.register(ScorePost)
class ScorePostAdmin(admin.ModelAdmin):
    list_display = ["identity", "resource_link", "score_given", "score_maximum", "state", "tries", "created_at"]
    list_filter = ["state"]
    readonly_fields = ["last_error"]


@admin.register(Embedding)
class EmbeddingAdmin(admin.ModelAdmin):
    list_display = ["platform", "origins"]
