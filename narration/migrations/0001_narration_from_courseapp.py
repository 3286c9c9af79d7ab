"""The Narration model, moved here from courseapp with its table (`courseapp_narration`) and rows.

The table is not touched: this creates the model in Django's state only (courseapp 0010 removed it there), and
relabels its content type so its permissions (the instructor group's included) and admin history follow it.
"""
import django.db.models.deletion
from django.db import migrations, models

import narration.models


def relabel(old_app, new_app):
    def run(apps, schema_editor):
        manager = apps.get_model("contenttypes", "ContentType").objects
        types = manager.using(schema_editor.connection.alias)
        if not types.filter(app_label=new_app, model="narration").exists():
            types.filter(app_label=old_app, model="narration").update(app_label=new_app)
        manager.clear_cache()
    return run


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("courseapp", "0010_narration_and_drafts_to_their_apps"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Narration",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                                   verbose_name="ID")),
                        ("status", models.CharField(choices=[("pending", "Queued"), ("running", "Synthesizing"),
                                                             ("ready", "Ready"), ("failed", "Failed")],
                                                    default="pending", max_length=10)),
                        ("origin", models.CharField(choices=[("piper", "Piper TTS"),
                                                             ("upload", "Uploaded by an instructor")],
                                                    default="piper", max_length=10)),
                        ("progress", models.FloatField(default=0.0, help_text="0 to 1 while synthesizing.")),
                        ("audio", models.FileField(blank=True, max_length=255,
                                                   upload_to=narration.models.narration_upload_to)),
                        ("vtt", models.FileField(blank=True, max_length=255,
                                                 upload_to=narration.models.narration_upload_to)),
                        ("duration", models.FloatField(default=0.0)),
                        ("cue_hash", models.CharField(blank=True, help_text="The module cues this audio speaks.",
                                                      max_length=64)),
                        ("voice", models.CharField(blank=True, max_length=100)),
                        ("error", models.TextField(blank=True)),
                        ("task_id", models.CharField(blank=True, max_length=64)),
                        ("priority", models.PositiveSmallIntegerField(
                            default=0, help_text="0: an instructor's job; 1: bulk.")),
                        ("queued_at", models.DateTimeField(blank=True, null=True)),
                        ("force", models.BooleanField(default=False,
                                                      help_text="Synthesize again even when cached audio exists.")),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        ("module", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE,
                                                        related_name="narration", to="courseapp.module")),
                    ],
                    options={"db_table": "courseapp_narration"},
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(relabel("courseapp", "narration"), relabel("narration", "courseapp")),
    ]
