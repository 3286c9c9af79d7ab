from django.core.management.base import BaseCommand, CommandError

from courseapp.models import Module
from narration import queue as narration_queue
from narration.jobs import CONVERT_TASK, convert_to_mp3, enqueue_narration, is_wav, run_narration, send


class Command(BaseCommand):
    help = ("Synthesize module narration with Piper here and now (cached by content hash: unchanged "
            "modules are quick). Uploaded narrations are left alone.")

    def add_arguments(self, parser):
        parser.add_argument("slugs", nargs="*", help="module slugs")
        parser.add_argument("--all", action="store_true", help="every module")
        parser.add_argument("--force", action="store_true", help="re-synthesize even if cached")
        parser.add_argument("--queue", action="store_true",
                            help="queue the work on the Celery `cpu` workers instead of running it here, "
                                 "skipping modules whose narration is current (what `make run` does); a current "
                                 "narration stored as WAV is queued for re-encoding as MP3")
        parser.add_argument("--mp3", action="store_true",
                            help="re-encode narrations stored as WAV (made before MP3, or uploaded) as MP3, "
                                 "keeping their cues; prints the bytes before and after")

    def handle(self, *args, slugs, all=False, force=False, queue=False, mp3=False, **options):
        if bool(slugs) == bool(all):
            raise CommandError("give module slugs or --all (not both)")
        modules = Module.objects.all() if all else Module.objects.filter(slug__in=slugs)
        missing = set(slugs) - set(modules.values_list("slug", flat=True))
        if missing:
            raise CommandError(f"no such module(s): {', '.join(sorted(missing))}")
        if mp3:
            self._convert(modules)
            return
        for module in modules.select_related("narration"):
            existing = getattr(module, "narration", None)
            kept = existing is not None and (existing.origin == existing.Origin.UPLOAD or not existing.is_stale)
            if queue and is_wav(existing) and kept and not force:  # a stale synthesized one is made again, as MP3
                try:
                    send(CONVERT_TASK, [existing.pk])
                except Exception as exc:  # kombu raises a variety of connection errors
                    self.stderr.write(f"{module.slug}: WAV narration not queued for MP3 ({exc.__class__.__name__})")
                else:
                    self.stdout.write(f"{module.slug}: WAV narration queued for re-encoding as MP3")
            if existing is not None and existing.origin == existing.Origin.UPLOAD and not force:
                self.stdout.write(f"{module.slug}: uploaded narration kept (use --force to replace it)")
                continue
            if queue:
                current = existing is not None and existing.is_ready and not existing.is_stale
                if (current or (existing is not None and existing.is_busy)) and not force:
                    continue
                record = enqueue_narration(module, force=force, priority=narration_queue.BULK)
                self.stdout.write(f"{module.slug}: narration {record.get_status_display().lower()}")
                continue
            try:
                record = run_narration(module.pk, force=force)
            except ValueError as exc:
                self.stderr.write(f"{module.slug}: skipped ({exc})")
                continue
            self.stdout.write(self.style.SUCCESS(f"{module.slug}: {record.duration:.1f} s, {len(module.cues)} cues"))

    def _convert(self, modules) -> None:
        for module in modules.select_related("narration"):
            record = getattr(module, "narration", None)
            try:
                sizes = convert_to_mp3(record) if record is not None else None
            except ValueError as exc:
                self.stderr.write(f"{module.slug}: kept as WAV ({exc})")
                continue
            if sizes is None:
                continue
            before, after = sizes
            self.stdout.write(self.style.SUCCESS(
                f"{module.slug}: {before:,} bytes of WAV → {after:,} bytes of MP3 ({before / after:.1f}× smaller)"))
