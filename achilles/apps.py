from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _sync_periodic_jobs(sender, **kwargs):
    from achilles.periodic import periodic_jobs_sync

    periodic_jobs_sync()


def _production_check(app_configs=None, databases=None, **kwargs):
    from django.core.checks import Error

    from achilles.security import production_problems

    return [Error(problem, id="achilles.E001") for problem in production_problems()]


class AchillesConfig(AppConfig):
    name = "achilles"
    verbose_name = "Platform"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Load the Celery app in every Django process (daphne included), so `.delay()` of any
        # shared task uses the configured broker rather than Celery's default.
        from achilles.celery_app import app  # noqa: F401

        post_migrate.connect(_sync_periodic_jobs, sender=self, dispatch_uid="achilles_periodic_jobs")

        # Sign-in failures and lockouts go to the audit trail; production refuses demo accounts.
        from axes.signals import user_locked_out
        from django.contrib.auth.signals import user_logged_in, user_login_failed
        from django.core.checks import Tags, register

        from achilles import security

        user_login_failed.connect(security.on_signin_failed, dispatch_uid="achilles_audit_signin_failed")
        user_logged_in.connect(security.on_signed_in, dispatch_uid="achilles_audit_signed_in")
        user_locked_out.connect(security.on_signin_locked_out, dispatch_uid="achilles_audit_signin_locked_out")
        register(_production_check, Tags.security, deploy=True)

        # OpenID Connect sign-ins (allauth's own signal carries the provider's answer): the
        # claim's groups, the account's source, the audit.
        from allauth.account.signals import user_logged_in as social_logged_in

        from achilles.directory.oidc import on_social_signed_in

        social_logged_in.connect(on_social_signed_in, dispatch_uid="achilles_oidc_signed_in")

        # The admin in Russian and branded; the libraries' internals for superusers only. The other
        # apps' admin modules are loaded already (django.contrib.admin's ready autodiscovers them).
        from achilles.admin_site import admin_site_configure

        admin_site_configure()
