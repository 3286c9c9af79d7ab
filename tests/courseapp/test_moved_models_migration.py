"""Narration (to the narration app) and ModuleDraft (to the authoring app) moved in Django's state only: a database
from before the split keeps their rows, found through the new models, and their permissions follow them."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("courseapp", "0009_narration_queue_order")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


@pytest.mark.django_db(transaction=True)
def test_narrations_and_drafts_keep_their_rows_and_permissions_across_the_split():
    executor = _migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    old_types = old.get_model("contenttypes", "ContentType").objects
    narration_type = old_types.get(app_label="courseapp", model="narration")  # as a database from before has it
    draft_type = old_types.get(app_label="courseapp", model="moduledraft")
    # The instructor group as a database from before has it (its data migration's rows are gone when an earlier
    # test in this process flushed the tables): the narration permission on the pre-split content type.
    Permission = old.get_model("auth", "Permission")
    group, _ = old.get_model("auth", "Group").objects.get_or_create(name="instructor")
    group.permissions.add(
        Permission.objects.get_or_create(content_type_id=narration_type.pk, codename="change_narration",
                                         defaults={"name": "Can change narration"})[0],
        Permission.objects.get_or_create(content_type=old_types.get(app_label="courseapp", model="module"),
                                         codename="instructor", defaults={"name": "Can author course content"})[0])
    track = old.get_model("courseapp", "Track").objects.create(slug="basics", title="Basics")
    Module = old.get_model("courseapp", "Module")
    module = Module.objects.create(slug="m", title="M", track=track, draft=False, source="Hello.")
    other = Module.objects.create(slug="n", title="N", track=track, order=1, draft=False, source="Hi.")
    old.get_model("courseapp", "Narration").objects.create(
        module=module, status="ready", origin="upload", audio="narration/uploads/m/a.mp3",
        vtt="narration/uploads/m/a.vtt", duration=12.5, priority=1, cue_hash="abc")
    author = old.get_model("auth", "User").objects.create(username="teacher")
    old.get_model("courseapp", "ModuleDraft").objects.create(
        module=other, front_matter={"title": "N2"}, source="Changed.", author=author)

    _migrate(executor.loader.graph.leaf_nodes())

    from authoring.models import ModuleDraft
    from courseapp.models import Module as CurrentModule
    from narration.models import Narration

    ContentType.objects.clear_cache()
    narration = Narration.objects.get(module__slug="m")
    assert (narration.status, narration.origin, narration.duration, narration.priority) == ("ready", "upload", 12.5, 1)
    assert narration.audio.name == "narration/uploads/m/a.mp3" and narration.is_ready
    assert CurrentModule.objects.get(slug="m").narration == narration  # the reverse accessor still works
    draft = CurrentModule.objects.get(slug="n").pending_draft
    assert draft == ModuleDraft.objects.get() and draft.source == "Changed." and draft.author.username == "teacher"
    # The content types were relabelled, not recreated: permissions given before the split still hold.
    assert ContentType.objects.get_for_model(Narration).pk == narration_type.pk
    assert ContentType.objects.get_for_model(ModuleDraft).pk == draft_type.pk
    assert not ContentType.objects.filter(app_label="courseapp", model__in=["narration", "moduledraft"]).exists()
    instructor = User.objects.create_user("instructor")
    instructor.groups.add(Group.objects.get(name="instructor"))
    assert instructor.has_perm("narration.change_narration") and instructor.has_perm("courseapp.instructor")

    # And back: the rows and content types return to courseapp, then forward again for the tests after this one.
    executor = _migrate(BEFORE)
    back = executor.loader.project_state(BEFORE).apps
    assert back.get_model("courseapp", "Narration").objects.get(module_id=module.pk).cue_hash == "abc"
    assert back.get_model("courseapp", "ModuleDraft").objects.get(module_id=other.pk).source == "Changed."
    assert back.get_model("contenttypes", "ContentType").objects.get(pk=narration_type.pk).app_label == "courseapp"
    _migrate(executor.loader.graph.leaf_nodes())
