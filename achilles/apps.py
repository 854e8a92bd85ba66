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
        # Load the Celery app in every Django process (daphne included), so `.delay()` of any
        # shared task uses the configured broker rather than Celery's default.
        from achilles.celery_app import app  # noqa: F401

        post_migrate.connect(_sync_periodic_jobs, sender=self, dispatch_uid="achilles_periodic_jobs")
