from django.core.management.base import BaseCommand, CommandError

from achilles.errors import ApplicationError
from achilles.models import ScimToken
from achilles.scim.services import scim_token_create, scim_token_revoke


class Command(BaseCommand):
    help = (
        "SCIM tokens of identity providers: `create NAME` prints a new token once, alone on the last line;"
        " `revoke NAME` revokes that provider's tokens; `list` shows them (never the secret)."
    )

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["create", "revoke", "list"])
        parser.add_argument("name", nargs="?", default="")

    def handle(self, *args, action, name, **options):
        try:
            if action == "list":
                for token in ScimToken.objects.order_by("name", "created_at"):
                    state = "revoked" if token.revoked_at else "active"
                    self.stdout.write(f"{token.name}\t{token.prefix}…\t{state}\tlast used {token.last_used_at or '-'}")
                return
            if not name:
                raise CommandError(f"scim_token {action} needs a NAME (the identity provider, e.g. entra)")
            if action == "revoke":
                self.stdout.write(f"revoked {scim_token_revoke(name=name, actor='manage.py scim_token')} token(s)")
                return
            _, raw = scim_token_create(name=name, actor="manage.py scim_token")
        except ApplicationError as exc:
            raise CommandError(str(exc.message)) from exc
        self.stdout.write(f"SCIM token for {name} (shown once):")
        self.stdout.write(raw)
