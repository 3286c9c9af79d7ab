from django import forms
from django.contrib import admin

from .loader import normalize_newlines, save_module
from .models import Choice, Module, ModuleProgress, Narration, Preference, Question, QuizAttempt, Track
from .rendering import ContentError, render_markdown


@admin.register(Track)
class TrackAdmin(admin.ModelAdmin):
    list_display = ("title", "slug", "order")
    list_editable = ("order",)
    prepopulated_fields = {"slug": ("title",)}


class QuestionInline(admin.TabularInline):
    model = Question
    fields = ("order", "text")
    readonly_fields = ("order", "text")
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False  # quizzes live in the Markdown source


class ModuleAdminForm(forms.ModelForm):
    source = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 30, "cols": 100}),
                             help_text="Markdown body; whitespace is kept so the file round-trips exactly.")

    class Meta:
        model = Module
        fields = "__all__"


@admin.register(Module)
class ModuleAdmin(admin.ModelAdmin):
    form = ModuleAdminForm
    list_display = ("title", "slug", "track", "order", "draft", "reading_minutes", "updated_at")
    list_filter = ("track", "draft")
    list_editable = ("order", "draft")
    search_fields = ("title", "slug", "summary", "source")
    readonly_fields = ("reading_minutes", "word_count", "cue_hash", "created_at", "updated_at")
    inlines = [QuestionInline]
    actions = ["publish", "unpublish"]

    def save_model(self, request, obj, form, change):
        """Re-render derived fields (HTML, cues, quiz rows) from the edited source."""
        obj.source = normalize_newlines(obj.source)
        try:
            rendered = render_markdown(obj.source)
        except ContentError as exc:
            self.message_user(request, f"Saved, but the lesson has an error: {exc}", level="error")
            super().save_model(request, obj, form, change)
            return
        front = {f: getattr(obj, f) for f in ("title", "short_title", "slug", "order", "prerequisites",
                                               "summary", "draft")}
        save_module(obj, front, obj.source, rendered, obj.track)

    @admin.action(description="Publish the selected modules")
    def publish(self, request, queryset):
        queryset.update(draft=False)

    @admin.action(description="Turn the selected modules into drafts")
    def unpublish(self, request, queryset):
        queryset.update(draft=True)


class ReadOnlyMixin:
    """Quiz rows are derived from the module's Markdown: edit the `:::{quiz}` block instead."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ChoiceInline(ReadOnlyMixin, admin.TabularInline):
    model = Choice
    extra = 0
    fields = ("order", "text", "correct", "explanation")


@admin.register(Question)
class QuestionAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("text", "module", "order")
    list_filter = ("module",)
    inlines = [ChoiceInline]


@admin.register(Narration)
class NarrationAdmin(admin.ModelAdmin):
    list_display = ("module", "status", "origin", "progress", "duration", "updated_at")
    list_filter = ("status", "origin")
    readonly_fields = ("progress", "cue_hash", "voice", "task_id", "error", "updated_at")


@admin.register(ModuleProgress)
class ModuleProgressAdmin(admin.ModelAdmin):
    list_display = ("module", "user", "visitor", "completed_at", "best_score", "visited_at")
    list_filter = ("module",)
    raw_id_fields = ("user",)


@admin.register(QuizAttempt)
class QuizAttemptAdmin(admin.ModelAdmin):
    list_display = ("module", "user", "visitor", "score", "total", "created_at")
    list_filter = ("module",)
    raw_id_fields = ("user",)


admin.site.register(Preference)
