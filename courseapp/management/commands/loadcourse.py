from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from courseapp.loader import CourseLoadError, load_course


class Command(BaseCommand):
    help = ("Load content/*.md and content/tracks.yaml into the database (idempotent, all or nothing). "
            "Narration is not synthesized here: see `narrate`.")

    def add_arguments(self, parser):
        parser.add_argument("path", nargs="?", default=None,
                            help="a content directory or one module file (default: settings.CONTENT_DIR)")

    def handle(self, *args, path=None, **options):
        path = path or settings.CONTENT_DIR
        try:
            report = load_course(path)
        except CourseLoadError as exc:
            count = len(exc.errors)
            raise CommandError(f"{count} error{'s' if count != 1 else ''} in the course content; "
                               f"nothing was changed:\n" + "\n".join(f"  {e}" for e in exc.errors)) from None
        for note in report.notes:
            self.stdout.write(self.style.WARNING(note))
        self.stdout.write(self.style.SUCCESS(
            f"Loaded {path}: {len(report.tracks)} track(s); modules created {len(report.created)}, "
            f"updated {len(report.updated)}, unchanged {len(report.unchanged)}."
        ))
