"""Stable quiz ids, the record of what content/ and the database last agreed on, and module drafts.

Existing quizzes get the ids the loader would generate for them (from each question's and choice's text, see
`courseapp.quiz_ids`), written into the module's Markdown, so a later load of an unchanged content file agrees
with the database. Stored attempts, keyed by question and choice positions until now, are rewritten to those
ids through the quiz as it is now (what the statistics used); an entry whose position the quiz no longer has
is kept as it was: its key is a number, which no id can be, so it stays out of every statistic as before.
"""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from courseapp.quiz_ids import generated_id, with_quiz_ids


def _keys(Question, Choice):
    """{module id: {question order: (question key, {choice order: choice key})}}, generated as the parser does
    (historical models: no reverse relations, which a reversed migration's state may not have)."""
    choices_of: dict = {}
    for question_id, order, text in Choice.objects.order_by("question_id", "order").values_list(
            "question_id", "order", "text"):
        choices_of.setdefault(question_id, []).append((order, text))
    by_module: dict = {}
    for question in Question.objects.order_by("module_id", "order"):
        entry = by_module.setdefault(question.module_id, {"taken": set(), "rows": {}})
        key = generated_id("q", question.text, entry["taken"])
        choice_taken: set[str] = set()
        choices = {order: generated_id("c", text, choice_taken) for order, text in choices_of.get(question.pk, [])}
        entry["rows"][question.order] = (key, choices)
    return {module_id: entry["rows"] for module_id, entry in by_module.items()}


def _write_ids_into_sources(Module):
    from courseapp.rendering import ContentError, render_markdown

    for module in Module.objects.exclude(source=""):
        try:
            rendered = render_markdown(module.source, validate_demos=False)
            written = with_quiz_ids(module.source, rendered.questions)
            again = render_markdown(written, validate_demos=False)
        except ContentError:
            continue  # a text today's renderer refuses: its next save asks for the fix and writes the ids
        if written != module.source and not any(q.generated for q in again.questions):
            Module.objects.filter(pk=module.pk).update(source=written)


def forwards(apps, schema_editor):
    Module, Question = apps.get_model("courseapp", "Module"), apps.get_model("courseapp", "Question")
    Choice, QuizAttempt = apps.get_model("courseapp", "Choice"), apps.get_model("courseapp", "QuizAttempt")
    keys = _keys(Question, Choice)
    for question in Question.objects.all():
        key, choices = keys[question.module_id][question.order]
        Question.objects.filter(pk=question.pk).update(key=key)
        for order, choice_key in choices.items():
            Choice.objects.filter(question=question, order=order).update(key=choice_key)
    _write_ids_into_sources(Module)
    for attempt in QuizAttempt.objects.all():
        quiz = keys.get(attempt.module_id, {})
        if not isinstance(attempt.answers, dict):
            continue
        answers = {}
        for position, picked in attempt.answers.items():
            known = quiz.get(int(position)) if str(position).isdigit() else None
            if known is None or not isinstance(picked, list):
                answers[position] = picked
                continue
            key, choices = known
            answers[key] = [choices[p] for p in picked if isinstance(p, int) and p in choices]
        QuizAttempt.objects.filter(pk=attempt.pk).update(answers=answers)


def backwards(apps, schema_editor):
    Question, QuizAttempt = apps.get_model("courseapp", "Question"), apps.get_model("courseapp", "QuizAttempt")
    Choice = apps.get_model("courseapp", "Choice")
    choices_of: dict = {}
    for question_id, key, order in Choice.objects.values_list("question_id", "key", "order"):
        choices_of.setdefault(question_id, {})[key] = order
    positions = {(q.module_id, q.key): (q.order, choices_of.get(q.pk, {})) for q in Question.objects.all()}
    for attempt in QuizAttempt.objects.all():
        if not isinstance(attempt.answers, dict):
            continue
        answers = {}
        for key, picked in attempt.answers.items():
            known = positions.get((attempt.module_id, key))
            if known is None or not isinstance(picked, list):
                answers[key] = picked
                continue
            order, choices = known
            answers[str(order)] = sorted(choices[k] for k in picked if k in choices)
        QuizAttempt.objects.filter(pk=attempt.pk).update(answers=answers)


class Migration(migrations.Migration):
    dependencies = [
        ("courseapp", "0005_search_index"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="question", name="key", field=models.CharField(default="", max_length=40),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="choice", name="key",
            field=models.CharField(default="", help_text="The authored id, unique in its question.", max_length=40),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="quizattempt", name="answers",
            field=models.JSONField(default=dict,
                                   help_text="Question id → list of chosen choice ids (authored ids)."),
        ),
        migrations.RunPython(forwards, backwards),
        migrations.AddConstraint(
            model_name="question",
            constraint=models.UniqueConstraint(fields=("module", "key"), name="question_key_unique"),
        ),
        migrations.AddField(
            model_name="module", name="synced_file_hash",
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
        migrations.AddField(
            model_name="module", name="synced_hash",
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
        migrations.CreateModel(
            name="ModuleDraft",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("front_matter", models.JSONField(
                    help_text="As `loader.authored` gives it: title, slug, track slug, order, …")),
                ("source", models.TextField(blank=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("author", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                             to=settings.AUTH_USER_MODEL)),
                ("module", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE,
                                                related_name="pending_draft", to="courseapp.module")),
            ],
        ),
    ]
