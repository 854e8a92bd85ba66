from django.apps import AppConfig


def _forget_embedding_config(event) -> None:
    from knowledge.search.embedding import forget_search_embedding_config

    forget_search_embedding_config()


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from achilles import hooks
        from knowledge import source_labels  # noqa: F401  (drops the cached labels when a policy changes)
        from knowledge.connectors import secrets  # noqa: F401  (registers the credentials-key check)

        # A changed model list reaches this process's search at once (the memo is dropped).
        hooks.allowed_models_changed.subscribe(_forget_embedding_config)
