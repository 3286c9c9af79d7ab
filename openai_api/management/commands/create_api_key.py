"""`manage.py create_api_key USERNAME [--name N]`: a new API key for an account, printed once (only its digest is
stored)."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from openai_api.keys import TooManyKeys, create_key


class Command(BaseCommand):
    help = "Make an API key for USERNAME and print it (it cannot be shown again)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="a label for the key (shown on the account page)")

    def handle(self, *args, **options):
        try:
            user = get_user_model().objects.get(username=options["username"])
        except get_user_model().DoesNotExist:
            raise CommandError(f"no account named {options['username']!r}") from None
        if not user.is_active:
            raise CommandError(f"{user.username} is inactive: a key of theirs would be refused")
        try:
            _, raw = create_key(user, options["name"] or "created by manage.py create_api_key")
        except TooManyKeys as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(raw)
