"""The demo agent (PLAT-1): owned by ``demo``, on the default (builtin) model, every 30 minutes."""

from datetime import timedelta

from django.core.management.base import BaseCommand
from django.utils import timezone

from achilles.models import User
from agents.models import Agent
from agents.services import agent_create

DEMO_AGENT_NAME = "Демо: памятка дежурному"
DEMO_INSTRUCTIONS = "Что делать дежурному при инциденте в продакшене?"


class Command(BaseCommand):
    help = "Create the demo agent of user `demo` (idempotent)."

    def handle(self, *args, **options):
        owner = User.objects.filter(username="demo").first()
        if owner is None:
            self.stdout.write("demo_agents: no user `demo` yet (run `manage.py demo_data`); skipped.")
            return
        if Agent.objects.filter(owner=owner, name=DEMO_AGENT_NAME).exists():
            self.stdout.write("Demo agent: exists.")
            return
        agent = agent_create(
            owner=owner,
            name=DEMO_AGENT_NAME,
            instructions=DEMO_INSTRUCTIONS,
            schedule={"type": "interval", "every_minutes": 30},
            first_run_at=timezone.now() + timedelta(minutes=1),
        )
        self.stdout.write(
            f"Demo agent «{agent.name}» (model {agent.model.name}): first run at {agent.next_run_at:%H:%M} UTC, "
            "then every 30 min; «run now» in the API: POST /api/agents/{id}/run.".replace("{id}", str(agent.pk))
        )
