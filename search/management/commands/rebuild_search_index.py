from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from search import index as search


class Command(BaseCommand):
    help = ("Rebuild the site search index (lessons and glossary) from the modules in the database. Saving a module "
            "keeps it current; run this after changing modules outside Django (raw SQL, a restored dump).")

    def handle(self, *args, **options):
        if not search.supported(connection):
            raise CommandError(f"site search needs SQLite (FTS5) or PostgreSQL, not {connection.vendor}")
        if not search.table_exists(connection):
            raise CommandError("the search table does not exist: run `manage.py migrate` first")
        rows = search.rebuild()
        self.stdout.write(self.style.SUCCESS(f"Search index rebuilt: {rows} rows."))
