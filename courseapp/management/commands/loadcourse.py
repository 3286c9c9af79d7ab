from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from courseapp.loader import CourseLoadError, load_course


class Command(BaseCommand):
    help = ("Load content/*.md and content/tracks.yaml into the database (all or nothing). New files create "
            "modules; a changed file updates its module unless the module was edited on the web since it was "
            "last loaded or exported, which is reported as a conflict and not applied (resolve it on /author/). "
            "Narration is not synthesized here: see `narrate`.")

    def add_arguments(self, parser):
        parser.add_argument("path", nargs="?", default=None,
                            help="a content directory or one module file (default: settings.CONTENT_DIR)")
        parser.add_argument("--force", action="store_true",
                            help="apply every file that differs from its module, even over edits made on the web "
                                 "(they stay in each module's History)")
        parser.add_argument("--strict", action="store_true",
                            help="exit with an error when a conflict was found (the rest is loaded all the same)")

    def handle(self, *args, path=None, force=False, strict=False, **options):
        path = path or settings.CONTENT_DIR
        try:
            report = load_course(path, force=force)
        except CourseLoadError as exc:
            count = len(exc.errors)
            raise CommandError(f"{count} error{'s' if count != 1 else ''} in the course content; "
                               f"nothing was changed:\n" + "\n".join(f"  {e}" for e in exc.errors)) from None
        for note in report.notes:
            self.stdout.write(self.style.WARNING(note))
        if report.kept:
            self.stdout.write(f"Kept the web edits of {len(report.kept)} module(s) whose file is unchanged: "
                              f"{', '.join(report.kept)} (export them to write them to the files).")
        for conflict in report.conflicts:
            self.stdout.write(self.style.ERROR(str(conflict)))
        if report.conflicts:
            self.stdout.write(self.style.ERROR(
                "Resolve each conflict on /author/ (keep the web version or take the file's), or run "
                "`manage.py loadcourse --force` to take every file."))
        self.stdout.write(self.style.SUCCESS(
            f"Loaded {path}: {len(report.tracks)} track(s); modules created {len(report.created)}, "
            f"updated {len(report.updated)}, unchanged {len(report.unchanged) + len(report.kept)}, "
            f"conflicts {len(report.conflicts)}."
        ))
        if strict and report.conflicts:
            raise CommandError(f"{len(report.conflicts)} conflict(s) between content/ and the web edits (--strict).")
