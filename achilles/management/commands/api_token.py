from django.core.management.base import BaseCommand, CommandError

from achilles.models import User
from achilles.services import api_token_create, user_ensure


class Command(BaseCommand):
    help = "Create a personal API token for USERNAME; the token is printed once, alone on the last line."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--create", action="store_true", help="create the user if missing")
        parser.add_argument("--staff", action="store_true", help="make the user a platform admin")
        parser.add_argument("--group", action="append", default=[], help="add the user to this group (repeatable)")
        parser.add_argument("--name", default="cli", help="a label for the token")

    def handle(self, *args, username, create, staff, group, name, **options):
        if create:
            user, created = user_ensure(username=username, staff=staff, groups=group)
            if created:
                self.stdout.write(f"created user {username}")
        else:
            user = User.objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"no user «{username}»; pass --create to create it")
            if staff or group:
                user_ensure(username=username, staff=staff, groups=group)
        if not user.is_active:
            raise CommandError(f"user «{username}» is inactive")
        _, raw = api_token_create(user=user, name=name, actor="manage.py api_token")
        self.stdout.write(f"token for {username} (shown once):")
        self.stdout.write(raw)
