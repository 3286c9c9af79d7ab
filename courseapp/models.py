"""Course content (tracks, modules, quizzes, images) and learner progress. A module's narration is the narration
app's model, its unpublished draft the authoring app's; both keep the tables they had here.

A module's Markdown (`Module.source`) plus its front-matter fields are the source of truth, mirrored
from `content/*.md`; everything else on the module (HTML, outline, cues, quiz rows) is derived from it by
`courseapp.rendering` whenever the module is saved through `Module.apply_render`.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from simple_history.models import HistoricalRecords

QUIZ_MARKER = "<!--quiz-->"


class Track(models.Model):
    slug = models.SlugField(unique=True)
    title = models.CharField(max_length=200)
    order = models.PositiveIntegerField(default=0)
    summary = models.TextField(blank=True)

    class Meta:
        ordering = ["order", "slug"]

    def __str__(self) -> str:
        return self.title


class ModuleQuerySet(models.QuerySet):
    def published(self):
        return self.filter(draft=False)

    def visible_to(self, user):
        if user.has_perm("courseapp.instructor"):
            return self
        return self.published()

    def in_course_order(self):
        return self.select_related("track").order_by("track__order", "track__slug", "order", "slug")


class ModuleManager(models.Manager.from_queryset(ModuleQuerySet)):
    """The modules that exist for the course: a module deleted from the authoring pages (`deleted_at`) is
    left out everywhere (pages, search, exports, statistics) until its delete is undone."""

    def get_queryset(self):
        return super().get_queryset().filter(deleted_at__isnull=True)


class Module(models.Model):
    # Front matter (exported verbatim by `exportcourse`).
    slug = models.SlugField(unique=True)
    title = models.CharField(max_length=200)
    short_title = models.CharField(max_length=80, blank=True)
    track = models.ForeignKey(Track, on_delete=models.PROTECT, related_name="modules")
    order = models.IntegerField(default=0)
    prerequisites = models.JSONField(default=list, blank=True, help_text="Ordered list of module slugs.")
    summary = models.TextField(blank=True)
    draft = models.BooleanField(default=True)
    source = models.TextField(blank=True, help_text="Markdown body, without front matter.")

    # Derived from `source` by the renderer.
    html = models.TextField(blank=True, editable=False)
    outline = models.JSONField(default=list, blank=True, editable=False)
    cues = models.JSONField(default=list, blank=True, editable=False)
    demos = models.JSONField(default=list, blank=True, editable=False)
    calculators = models.JSONField(default=list, blank=True, editable=False)
    word_count = models.PositiveIntegerField(default=0, editable=False)
    reading_minutes = models.PositiveIntegerField(default=1, editable=False)
    cue_hash = models.CharField(max_length=64, blank=True, editable=False)

    # What `content/` and this row last agreed on (`authoring.content_sync`): the SHA-256 of the content
    # file's text when it was last loaded or exported, and of this module's own file text at that moment.
    # Blank for a module never loaded from or exported to content/.
    synced_file_hash = models.CharField(max_length=64, blank=True, editable=False)
    synced_hash = models.CharField(max_length=64, blank=True, editable=False)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Set by a delete from the authoring pages: the row, its revisions and its learners' records stay, so
    # the delete can be undone; only the admin deletes for good.
    deleted_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ModuleManager()
    all_objects = ModuleQuerySet.as_manager()  # deleted modules included: undo, the loader's slug checks
    # Every save keeps a revision of what an author wrote (front matter and source, with the author and
    # time); derived fields are left out: they are re-rendered from the source when a revision is restored.
    history = HistoricalRecords(excluded_fields=[
        "html", "outline", "cues", "demos", "calculators", "word_count", "reading_minutes", "cue_hash", "updated_at",
        "synced_file_hash", "synced_hash", "deleted_at",
    ])

    class Meta:
        ordering = ["track__order", "order", "slug"]
        permissions = [("instructor", "Can author course modules and narrations")]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("courseapp:module", args=[self.slug])

    @property
    def label(self) -> str:
        return self.short_title or self.title

    @property
    def has_interactive(self) -> bool:
        return bool(self.demos or self.calculators)

    @property
    def prerequisite_slugs(self) -> list[str]:
        """The prerequisites that are slugs: a malformed value saved outside the forms cannot break a page."""
        value = self.prerequisites if isinstance(self.prerequisites, list) else []
        return [slug for slug in value if isinstance(slug, str)]

    def html_parts(self) -> tuple[str, str]:
        """The lesson HTML before and after the quiz (the quiz form is rendered by Django)."""
        before, _, after = self.html.partition(QUIZ_MARKER)
        return before, after

    def apply_render(self, rendered) -> None:
        """Copy a `rendering.RenderedModule` onto the derived fields (does not save)."""
        self.html = rendered.html
        self.outline = rendered.outline
        self.cues = [cue.as_dict() for cue in rendered.cues]
        self.demos = rendered.demos
        self.calculators = rendered.calculators
        self.word_count = rendered.word_count
        self.reading_minutes = rendered.reading_minutes
        self.cue_hash = rendered.cue_hash

    def replace_quiz(self, questions) -> None:
        """Replace the quiz rows with `rendering.QuizQuestion`s (the module must be saved)."""
        self.questions.all().delete()
        for q_order, question in enumerate(questions, start=1):
            row = Question.objects.create(
                module=self, order=q_order, key=question.id, text=question.text, text_html=question.text_html
            )
            Choice.objects.bulk_create(
                Choice(
                    question=row,
                    order=c_order,
                    key=choice.id,
                    text=choice.text,
                    text_html=choice.text_html,
                    correct=choice.correct,
                    explanation=choice.explanation,
                    explanation_html=choice.explanation_html,
                )
                for c_order, choice in enumerate(question.choices, start=1)
            )


class Question(models.Model):
    """A quiz question: `order` is its place in the quiz now, `key` its authored id (`courseapp.quiz_ids`),
    which attempts and statistics refer to, so they stay with the question when the quiz is reordered."""

    module = models.ForeignKey(Module, on_delete=models.CASCADE, related_name="questions")
    order = models.PositiveIntegerField()
    key = models.CharField(max_length=40)
    text = models.TextField()
    text_html = models.TextField()

    class Meta:
        ordering = ["module", "order"]
        constraints = [models.UniqueConstraint(fields=["module", "order"], name="question_order_unique"),
                       models.UniqueConstraint(fields=["module", "key"], name="question_key_unique")]

    def __str__(self) -> str:
        return self.text

    @property
    def field_name(self) -> str:
        return f"q{self.order}"

    @property
    def multiple(self) -> bool:
        """More than one correct choice: answered with checkboxes (uses prefetched choices)."""
        return sum(choice.correct for choice in self.choices.all()) > 1


class Choice(models.Model):
    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="choices")
    order = models.PositiveIntegerField()
    key = models.CharField(max_length=40, help_text="The authored id, unique in its question.")
    text = models.TextField()
    text_html = models.TextField()
    correct = models.BooleanField(default=False)
    explanation = models.TextField()
    explanation_html = models.TextField()

    class Meta:
        ordering = ["question", "order"]

    def __str__(self) -> str:
        return self.text


class ModuleImage(models.Model):
    """An image uploaded to a module, which its lesson shows as ``![alt](images/<name>)``; the bytes are
    stored once per content (`courseapp.images.file_path`)."""

    module = models.ForeignKey(Module, on_delete=models.CASCADE, related_name="images")
    name = models.CharField(max_length=100)
    alt = models.CharField(max_length=500, help_text="What the image shows, for students who cannot see it.")
    digest = models.CharField(max_length=64)  # sha256 of the bytes
    extension = models.CharField(max_length=8)
    size = models.PositiveIntegerField()
    uploaded_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["module", "name"], name="module_image_name")]

    def __str__(self) -> str:
        return f"{self.module.slug}/{self.name}"


class LearnerQuerySet(models.QuerySet):
    def for_learner(self, learner):
        """Rows belonging to a `progress.Learner` (a user, or an anonymous visitor id)."""
        if learner.user is not None:
            return self.filter(user=learner.user)
        if learner.visitor:
            return self.filter(user=None, visitor=learner.visitor)
        return self.none()


class ModuleProgress(models.Model):
    """What a learner (user or anonymous visitor) has done in a module."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE)
    visitor = models.CharField(max_length=64, blank=True, db_index=True)
    module = models.ForeignKey(Module, on_delete=models.CASCADE, related_name="progress")
    visited_at = models.DateTimeField(auto_now=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    best_score = models.PositiveIntegerField(null=True, blank=True)
    audio_position = models.FloatField(default=0.0)
    last_section = models.CharField(max_length=120, blank=True, help_text="Id of the heading last read.")

    objects = LearnerQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "module progress"
        constraints = [
            models.UniqueConstraint(
                fields=["user", "module"], condition=Q(user__isnull=False), name="progress_user_module"
            ),
            models.UniqueConstraint(
                fields=["visitor", "module"], condition=Q(user__isnull=True), name="progress_visitor_module"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user or self.visitor} · {self.module}"

    @property
    def completed(self) -> bool:
        return self.completed_at is not None


class QuizAttempt(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE)
    visitor = models.CharField(max_length=64, blank=True, db_index=True)
    module = models.ForeignKey(Module, on_delete=models.CASCADE, related_name="attempts")
    score = models.PositiveIntegerField()
    total = models.PositiveIntegerField()
    answers = models.JSONField(default=dict, help_text="Question id → list of chosen choice ids (authored ids).")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = LearnerQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.module} {self.score}/{self.total}"


class Preference(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="course_prefs")
    autoplay = models.BooleanField(default=False, help_text="Start the audio version when a module opens.")

    def __str__(self) -> str:
        return f"Preferences of {self.user}"
