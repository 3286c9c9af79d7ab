from django.core.management.base import BaseCommand

from lti.scores import send_pending


class Command(BaseCommand):
    help = "Send the quiz scores a platform has not accepted yet (run it from cron, e.g. every 10 minutes)."

    def handle(self, *args, **options):
        sent, failed = send_pending()
        self.stdout.write(f"{sent} sent, {failed} still pending")
