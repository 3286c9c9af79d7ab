"""Print a single-use LTI Dynamic Registration link to paste into an LMS (docs/lti.md, "Dynamic registration")."""
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from lti.registration import new_link


class Command(BaseCommand):
    help = "Make a single-use link an LMS registers this tool with (LTI Dynamic Registration)."

    def add_arguments(self, parser):
        parser.add_argument("--base", required=True, help="This site's public address, e.g. https://lab.example.org")
        parser.add_argument("--days", type=float, default=7, help="How long the link stays valid (default 7 days)")

    def handle(self, *args, **options):
        base = options["base"].rstrip("/")
        if not base.startswith(("https://", "http://")):
            raise CommandError("--base must be the site's address, starting with https://")
        token = new_link(options["days"])
        self.stdout.write(f"{base}{reverse('lti:register', args=[token])}")
