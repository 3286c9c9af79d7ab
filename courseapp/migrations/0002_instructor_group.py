"""The "instructor" group: authoring UI access plus the course models in the admin."""
from django.db import migrations

ADMIN_PERMISSIONS = [
    f"{action}_{model}"
    for model in ("track", "module", "question", "choice", "narration")
    for action in ("add", "change", "delete", "view")
] + ["view_moduleprogress", "view_quizattempt"]


def create_instructor_group(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    app_config = apps.get_app_config("courseapp")
    app_config.models_module = True
    create_permissions(app_config, verbosity=0, apps=apps)
    app_config.models_module = None

    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name="instructor")
    group.permissions.add(*Permission.objects.filter(
        content_type__app_label="courseapp", codename__in=["instructor", *ADMIN_PERMISSIONS]
    ))


def remove_instructor_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name="instructor").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("courseapp", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_instructor_group, remove_instructor_group)]
