from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from simple_history.admin import SimpleHistoryAdmin

from .forms import ModuleForm
from .instructors import make_instructor
from .loader import normalize_newlines, save_module
from .models import Choice, Module, ModuleProgress, Preference, Question, QuizAttempt, Track
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

    def clean_prerequisites(self) -> list[str]:
        """The same rules as the authoring form: existing module slugs, not itself, no cycle."""
        value = self.cleaned_data.get("prerequisites") or []
        if not isinstance(value, list) or not all(isinstance(slug, str) for slug in value):
            raise forms.ValidationError('Give a list of module slugs, e.g. ["overview", "kv-cache"].')
        authoring = ModuleForm(instance=self.instance)
        authoring.cleaned_data = {"prerequisites": ", ".join(value)}
        return authoring.clean_prerequisites()

    def clean_source(self) -> str:
        """A lesson with a content error is not saved: its stored HTML would no longer match its source."""
        source = normalize_newlines(self.cleaned_data.get("source") or "")
        try:
            self.rendered = render_markdown(source)
        except ContentError as exc:
            raise forms.ValidationError(f"Line {exc.line}: {exc.message}" if exc.line else exc.message) from None
        return source


@admin.register(Module)
class ModuleAdmin(SimpleHistoryAdmin):
    form = ModuleAdminForm
    list_display = ("title", "slug", "track", "order", "draft", "deleted_at", "reading_minutes", "updated_at")
    list_filter = ("track", "draft")
    list_editable = ("order", "draft")
    search_fields = ("title", "slug", "summary", "source")
    readonly_fields = ("reading_minutes", "word_count", "cue_hash", "created_at", "updated_at")
    inlines = [QuestionInline]
    actions = ["publish", "unpublish"]

    def get_queryset(self, request):
        """Deleted modules too (a delete from the authoring pages is soft): the admin is where they go for good."""
        return Module.all_objects.select_related("track")

    def has_delete_permission(self, request, obj=None):
        """Deleting for good, with the learners' records, is for superusers; instructors delete softly, with
        undo, from the authoring pages (and never meet a list of objects they may not delete)."""
        return request.user.is_superuser

    def save_model(self, request, obj, form, change):
        """Re-render derived fields (HTML, cues, quiz rows) from the edited source."""
        rendered = getattr(form, "rendered", None)
        if rendered is None:  # the change list's order/draft edits: the source, so its HTML, is unchanged
            super().save_model(request, obj, form, change)
            return
        front = {f: getattr(obj, f) for f in ("title", "short_title", "slug", "order", "prerequisites",
                                               "summary", "draft")}
        save_module(obj, front, form.cleaned_data["source"], rendered, obj.track, reason="Edited in the admin")

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


class TaughtStudentsAdmin(admin.ModelAdmin):
    """A learner's records: an instructor sees only those of the students enrolled in cohorts they teach (the
    class pages' rule, classes/access.py), never a visitor's or another section's; a superuser sees all."""

    def get_queryset(self, request):
        records = super().get_queryset(request)
        if request.user.is_superuser:
            return records
        return records.filter(user__enrollments__cohort__instructors=request.user).distinct()


@admin.register(ModuleProgress)
class ModuleProgressAdmin(TaughtStudentsAdmin):
    list_display = ("module", "user", "visitor", "completed_at", "best_score", "visited_at")
    list_filter = ("module",)
    raw_id_fields = ("user",)


@admin.register(QuizAttempt)
class QuizAttemptAdmin(TaughtStudentsAdmin):
    list_display = ("module", "user", "visitor", "score", "total", "created_at")
    list_filter = ("module",)
    raw_id_fields = ("user",)


admin.site.register(Preference)


User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class InstructorUserAdmin(UserAdmin):
    """Django's user admin with one more action: the same as `manage.py createinstructor` for existing users."""

    actions = ["make_instructors"]

    @admin.action(description="Make the selected users instructors (staff, instructor group)")
    def make_instructors(self, request, queryset):
        for user in queryset:
            make_instructor(user)
        self.message_user(request, f"{queryset.count()} user(s) can now author the course.")
