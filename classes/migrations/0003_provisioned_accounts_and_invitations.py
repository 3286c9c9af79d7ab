"""Accounts an import made (the only ones that get set-password links) and invitations for accounts that existed.

The backfill records as made by an import only the import enrollments whose account was created in the same
moment as the enrollment, has never signed in, and has no LTI identity: an existing account that an import
enrolled before this migration (the takeover this closes) does not qualify, so its links stop at once.
"""
from datetime import timedelta

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


SAME_MOMENT = timedelta(seconds=5)


def record_provisioned(apps, schema_editor):
    Enrollment = apps.get_model("classes", "Enrollment")
    ProvisionedAccount = apps.get_model("classes", "ProvisionedAccount")
    Identity = apps.get_model("lti", "Identity")
    with_identity = set(Identity.objects.values_list("user_id", flat=True))
    seen = set()
    for enrollment in (Enrollment.objects.filter(source="import", user__last_login__isnull=True)
                       .select_related("user").order_by("joined_at")):
        user = enrollment.user
        if user.pk in seen or user.pk in with_identity or abs(enrollment.joined_at - user.date_joined) > SAME_MOMENT:
            continue
        seen.add(user.pk)
        ProvisionedAccount.objects.create(user=user, cohort_id=enrollment.cohort_id)


class Migration(migrations.Migration):

    dependencies = [
        ('classes', '0002_enrollment_source_lti'),
        ('lti', '0001_lti_launch_records'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ProvisionedAccount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('cohort', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='provisioned_accounts', to='classes.cohort')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='provisioned', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='Invitation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('username_typed', models.CharField(max_length=150)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('cohort', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='invitations', to='classes.cohort')),
                ('invited_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='cohort_invitations', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at', '-pk'],
                'constraints': [models.UniqueConstraint(fields=('cohort', 'user'), name='one_invitation_per_cohort')],
            },
        ),
        migrations.RunPython(record_provisioned, migrations.RunPython.noop),
    ]
