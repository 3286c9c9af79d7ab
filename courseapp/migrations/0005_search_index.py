"""The site search index (search/index.py): an FTS5 table on SQLite, a weighted tsvector table on PostgreSQL.

RunPython rather than RunSQL so each database gets its own DDL (and any other database none: search is then
empty). The index is filled from the modules already loaded; after this, saving a module keeps it current.
"""
from django.db import migrations


def create_index(apps, schema_editor):
    from search import index as search

    connection = schema_editor.connection
    if not search.supported(connection):
        return
    search.create_table(connection)
    search.rebuild(apps.get_model("courseapp", "Module").objects.using(connection.alias).all(), connection)


def drop_index(apps, schema_editor):
    from search import index as search

    search.drop_table(schema_editor.connection)


class Migration(migrations.Migration):

    dependencies = [
        ("courseapp", "0004_module_history"),
    ]

    operations = [
        migrations.RunPython(create_index, drop_index, elidable=False),
    ]
