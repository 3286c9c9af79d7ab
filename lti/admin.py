"""Platform registrations and the tool key are edited through the library's admin (`LtiTool`, whose JWKS, token
and login URLs must be https://: platform_urls.py; `LtiToolKey`); these pages show what launches left behind,
and score posts still owed."""
from django import forms
from django.contrib import admin
from pylti1p3.contrib.django.lti1p3_tool_config.admin import LtiToolAdmin
from pylti1p3.contrib.django.lti1p3_tool_config.models import LtiTool

from . import platform_urls
from .models import Context, Embedding, Identity, ResourceLink, ScorePost


class PlatformForm(forms.ModelForm):
    """The library's registration form, refusing an http:// JWKS, token or login URL (platform_urls.py)."""

    class Meta:
        model = LtiTool
        fields = "__all__"

    def clean(self):
        cleaned = super().clean()
        for field, problem in platform_urls.problems(cleaned).items():
            self.add_error(field, problem)
        return cleaned


admin.site.unregister(LtiTool)


@admin.register(LtiTool)
class PlatformAdmin(LtiToolAdmin):
    form = PlatformForm


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
    list_display = ["identity", "resource_link", "activity", "score_given", "score_maximum", "state", "tries",
                    "next_try_at", "created_at"]
    list_filter = ["state"]
    readonly_fields = ["last_error", "answer", "claimed_until"]


@admin.register(Embedding)
class EmbeddingAdmin(admin.ModelAdmin):
    list_display = ["platform", "origins"]
