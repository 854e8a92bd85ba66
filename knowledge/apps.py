from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from achilles.models import AgentModel
        from knowledge.selectors import forget_search_embedding_config

        # A changed model list reaches this process's search at once (the memo is dropped).
        for signal in (post_save, post_delete):
            signal.connect(forget_search_embedding_config, sender=AgentModel,
                           dispatch_uid=f"knowledge-embedding-config-{signal is post_save}")
