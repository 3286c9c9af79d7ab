"""Runs get a share id (unguessable, for share links), the device/dtype they ran on and why a replay was served."""
import secrets

from django.db import migrations, models

import demos.models


def fill_share_ids(apps, schema_editor):
    Run = apps.get_model("demos", "Run")
    for run in Run.objects.filter(share_id__isnull=True).only("id").iterator():
        Run.objects.filter(pk=run.pk).update(share_id=secrets.token_urlsafe(12))


class Migration(migrations.Migration):

    dependencies = [
        ("demos", "0001_initial"),
    ]

    operations = [
        migrations.AddField(model_name="run", name="replay_reason", field=models.CharField(blank=True, max_length=16)),
        migrations.AddField(model_name="run", name="device", field=models.CharField(blank=True, max_length=32)),
        migrations.AddField(model_name="run", name="dtype", field=models.CharField(blank=True, max_length=32)),
        migrations.AddField(model_name="run", name="share_id",
                            field=models.CharField(editable=False, max_length=32, null=True)),
        migrations.RunPython(fill_share_ids, migrations.RunPython.noop),
        migrations.AlterField(model_name="run", name="share_id",
                              field=models.CharField(default=demos.models.new_share_id, editable=False,
                                                     max_length=32, unique=True)),
    ]
