"""A module's labs (derived from its Markdown, like its quiz rows) and each learner's attempt at one.

`Lab` rows are replaced whenever the module is saved (`replace_labs`, called beside `Module.replace_quiz`), so
grading reads the definition the page shows. An attempt names its lab by module and key, not by row, so it
survives those re-saves, as quiz attempts keep their question keys.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from courseapp.models import LearnerQuerySet


class Lab(models.Model):
    module = models.ForeignKey("courseapp.Module", on_delete=models.CASCADE, related_name="labs")
    key = models.CharField(max_length=40, help_text="The id on the ':::{lab}' line.")
    order = models.PositiveIntegerField()
    definition = models.JSONField(help_text="As labs.definition.parse_lab gives it.")

    class Meta:
        ordering = ["module", "order"]
        constraints = [models.UniqueConstraint(fields=["module", "key"], name="lab_module_key_unique")]

    def __str__(self) -> str:
        return f"{self.module_id}/{self.key}"


def replace_labs(module, definitions: list[dict]) -> None:
    """Replace `module`'s lab rows with the definitions its render produced (the module must be saved)."""
    Lab.objects.filter(module=module).delete()
    Lab.objects.bulk_create(Lab(module=module, key=d["id"], order=n, definition=d)
                            for n, d in enumerate(definitions, start=1))


class LabAttempt(models.Model):
    """A learner's answers to one lab, saved as they go; `submitted_at` and `score` once submitted."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE)
    visitor = models.CharField(max_length=64, blank=True, db_index=True)
    module = models.ForeignKey("courseapp.Module", on_delete=models.CASCADE, related_name="lab_attempts")
    lab_key = models.CharField(max_length=40)
    answers = models.JSONField(default=dict, help_text="Question id → the learner's answer.")
    # The feedback of the submission, with the numbers of the table it was graded against (the table changes
    # when the student re-runs a row later; their grade does not).
    feedback = models.JSONField(default=dict, blank=True)
    score = models.FloatField(null=True, blank=True, help_text="Correct ÷ graded questions, once submitted.")
    submitted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = LearnerQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(fields=["user", "module", "lab_key"], condition=Q(user__isnull=False),
                                    name="lab_attempt_user_unique"),
            models.UniqueConstraint(fields=["visitor", "module", "lab_key"], condition=Q(user__isnull=True),
                                    name="lab_attempt_visitor_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user or self.visitor} · {self.module_id}/{self.lab_key}"
