"""Narration moves to the narration app and ModuleDraft to the authoring app: in Django's state only.

Their tables (`courseapp_narration`, `courseapp_moduledraft`) and rows stay where they are; the models in
their new apps name those tables (`Meta.db_table`), and the new apps' first migrations take over the state
and the content types (so permissions, the instructor group's included, and admin history follow).
"""
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("courseapp", "0009_narration_queue_order"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="ModuleDraft"),
                migrations.DeleteModel(name="Narration"),
            ],
            database_operations=[],
        ),
    ]
