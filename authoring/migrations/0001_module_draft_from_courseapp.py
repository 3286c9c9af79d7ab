"""The ModuleDraft model, moved here from courseapp with its table (`courseapp_moduledraft`) and rows.

The table is not touched: this creates the model in Django's state only (courseapp 0010 removed it there), and
relabels its content type so its permissions and admin history follow it.
"""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def relabel(old_app, new_app):
    def run(apps, schema_editor):
        manager = apps.get_model("contenttypes", "ContentType").objects
        types = manager.using(schema_editor.connection.alias)
        if not types.filter(app_label=new_app, model="moduledraft").exists():
            types.filter(app_label=old_app, model="moduledraft").update(app_label=new_app)
        manager.clear_cache()
    return run


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("courseapp", "0010_narration_and_drafts_to_their_apps"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ModuleDraft",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                                   verbose_name="ID")),
                        ("front_matter", models.JSONField(
                            help_text="As `loader.authored` gives it: title, slug, track slug, order, …")),
                        ("source", models.TextField(blank=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        ("author", models.ForeignKey(blank=True, null=True,
                                                     on_delete=django.db.models.deletion.SET_NULL,
                                                     to=settings.AUTH_USER_MODEL)),
                        ("module", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE,
                                                        related_name="pending_draft", to="courseapp.module")),
                    ],
                    options={"db_table": "courseapp_moduledraft"},
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(relabel("courseapp", "authoring"), relabel("authoring", "courseapp")),
    ]
