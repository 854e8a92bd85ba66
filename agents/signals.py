"""Hooks on the platform's User that the Agent Engine needs (the deactivation cascade itself is a
database trigger, see migration 0002): a changed owner time zone moves calendar slots."""

from __future__ import annotations

from django.db.models.signals import post_save, pre_save
from django.dispatch import receiver

from achilles.models import User


@receiver(pre_save, sender=User, dispatch_uid="agents_user_timezone_before")
def _remember_timezone(sender, instance: User, update_fields=None, **kwargs) -> None:
    # A login saves last_login only: no extra query for that.
    if instance.pk and (update_fields is None or "timezone" in update_fields):
        instance._agents_old_timezone = User.objects.filter(pk=instance.pk).values_list("timezone", flat=True).first()


@receiver(post_save, sender=User, dispatch_uid="agents_user_timezone_after")
def _reschedule_calendar_agents(sender, instance: User, created: bool, **kwargs) -> None:
    if created or getattr(instance, "_agents_old_timezone", instance.timezone) == instance.timezone:
        return
    from agents.services import agents_reschedule_calendar

    agents_reschedule_calendar(owner=instance)
