from django.core.management.base import BaseCommand

from courseapp.loader import export_course


class Command(BaseCommand):
    help = "Write the course in the database (drafts included) to DIR as tracks.yaml + <slug>.md files."

    def add_arguments(self, parser):
        parser.add_argument("directory", help="target directory, e.g. content/")

    def handle(self, *args, directory, **options):
        written = export_course(directory)
        self.stdout.write(self.style.SUCCESS(f"Wrote {len(written)} file(s) to {directory}."))
