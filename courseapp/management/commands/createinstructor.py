"""`python manage.py createinstructor USERNAME [--email E] [--no-input]`: an instructor account in one step."""
from __future__ import annotations

import getpass
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from courseapp.instructors import make_instructor


class Command(BaseCommand):
    help = ("Create an instructor (or make an existing account one): staff, in the 'instructor' group, which can "
            "author modules at /author/ and edit the course in the admin, and nothing else.")

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--email", default="")
        parser.add_argument("--no-input", action="store_true",
                            help="do not ask for a password (a new account gets none: set it with changepassword)")

    def handle(self, username, email, no_input, **options):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        created = user is None
        if created:
            user = User(username=username, email=email)
            password = None if no_input or not sys.stdin.isatty() else self._ask_password(user)
            if password:
                user.set_password(password)
            else:
                user.set_unusable_password()
            user.save()
        elif email and user.email != email:
            user.email = email
            user.save(update_fields=["email"])
        make_instructor(user)
        verb = "Created" if created else "Updated"
        self.stdout.write(f"{verb} instructor {username!r}: authoring at /author/, the course in the admin at /admin/.")
        if not user.has_usable_password():
            self.stdout.write(f"It has no password yet: python manage.py changepassword {username}")

    def _ask_password(self, user) -> str:
        for _ in range(3):
            password = getpass.getpass("Password: ")
            if password != getpass.getpass("Password (again): "):
                self.stderr.write("The passwords differ.")
                continue
            try:
                validate_password(password, user)
            except ValidationError as exc:
                self.stderr.write(" ".join(exc.messages))
                continue
            return password
        raise CommandError("no valid password given")
