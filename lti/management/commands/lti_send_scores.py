from django.core.management.base import BaseCommand

from lti.scores import send_pending


class Command(BaseCommand):
    help = ("Send every score a platform has not accepted yet, now (the `cpu` worker's sweep sends them by itself: "
            "this is a manual tool, never needed in a cron job).")

    def handle(self, *args, **options):
        sent, failed = send_pending()
        self.stdout.write(f"{sent} sent, {failed} not accepted (see the gradebook or the admin's Score posts)")
