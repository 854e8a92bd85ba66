"""Hooks on the platform's models that the Agent Engine needs (the deactivation cascade itself is a
database trigger, see migration 0002): a changed owner time zone moves that owner's calendar slots;
a changed organisation time zone moves those of every owner without a zone of their own."""

from __future__ import annotations

from django.db.models.signals import post_save, pre_save
from django.dispatch import receiver

from achilles.models import PlatformSettings, User


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


@receiver(pre_save, sender=PlatformSettings, dispatch_uid="agents_org_timezone_before")
def _remember_org_timezone(sender, instance: PlatformSettings, update_fields=None, **kwargs) -> None:
    if update_fields is None or "timezone" in update_fields:
        instance._agents_old_timezone = (PlatformSettings.objects.filter(pk=instance.pk)
                                         .values_list("timezone", flat=True).first())


@receiver(post_save, sender=PlatformSettings, dispatch_uid="agents_org_timezone_after")
def _reschedule_for_org_timezone(sender, instance: PlatformSettings, created: bool, **kwargs) -> None:
    old = getattr(instance, "_agents_old_timezone", instance.timezone)
    if created or old is None or old == instance.timezone:
        return
    from agents.services import agents_reschedule_for_org_timezone

    agents_reschedule_for_org_timezone(timezone_name=instance.timezone)
