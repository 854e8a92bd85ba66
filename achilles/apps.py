from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _sync_periodic_jobs(sender, **kwargs):
    from achilles.periodic import periodic_jobs_sync

    periodic_jobs_sync()


class AchillesConfig(AppConfig):
    name = "achilles"
    verbose_name = "Platform"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        post_migrate.connect(_sync_periodic_jobs, sender=self, dispatch_uid="achilles_periodic_jobs")
