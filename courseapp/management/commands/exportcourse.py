from django.core.management.base import BaseCommand

from courseapp.loader import export_course, not_exported


class Command(BaseCommand):
    help = ("Write the course in the database (drafts included) to DIR as tracks.yaml + <slug>.md files. In "
            "content/, a file changed on disk since it was last loaded is left as it is.")

    def add_arguments(self, parser):
        parser.add_argument("directory", help="target directory, e.g. content/")

    def handle(self, *args, directory, **options):
        written = export_course(directory)
        self.stdout.write(self.style.SUCCESS(f"Wrote {len(written)} file(s) to {directory}."))
        skipped = not_exported(written)
        if skipped:
            self.stdout.write(self.style.WARNING(
                "Not written, since their files changed on disk after they were last loaded (load them, or "
                f"resolve the conflicts on /author/): {', '.join(f'{slug}.md' for slug in skipped)}"))
