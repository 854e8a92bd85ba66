"""Core invariants held by the database itself: each one broken with raw SQL."""

import pytest
from django.db import IntegrityError, connection, transaction

from achilles.models import AllowedModel, ApiToken, PlatformSettings
from achilles.services import api_token_create

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def _raw(sql, params=()):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else None


def test_second_default_chat_model_is_refused_by_the_database(model_factory):
    model_factory(name="first", is_default=True)
    with pytest.raises(IntegrityError, match="achilles_agentmodel_one_default_per_kind"), transaction.atomic():
        _raw(
            "INSERT INTO agent_models (name, provider, kind, context_window, is_default, options) "
            "VALUES ('second', 'builtin', 'chat', 8192, true, '{}')"
        )
    assert AllowedModel.objects.filter(is_default=True, kind="chat").count() == 1


def test_a_default_embedding_model_coexists_with_the_default_chat_model(model_factory):
    model_factory(name="chat", is_default=True)
    _raw(
        "INSERT INTO agent_models (name, provider, kind, context_window, is_default, options) "
        "VALUES ('emb', 'hash', 'embedding', 8192, true, '{}')"
    )
    assert AllowedModel.objects.filter(is_default=True).count() == 2


def test_unknown_model_kind_is_refused_by_the_database():
    with pytest.raises(IntegrityError, match="achilles_agentmodel_kind_valid"), transaction.atomic():
        _raw(
            "INSERT INTO agent_models (name, provider, kind, context_window, is_default, options) "
            "VALUES ('x', 'builtin', 'vision', 8192, false, '{}')"
        )


def test_created_and_updated_at_come_from_database_defaults():
    _raw(
        "INSERT INTO agent_models (name, provider, kind, context_window, is_default, options) "
        "VALUES ('raw', 'builtin', 'chat', 8192, false, '{}')"
    )
    created, updated = _raw("SELECT created_at, updated_at FROM agent_models WHERE name = 'raw'")[0]
    assert created is not None and updated is not None


def test_raw_sql_update_bumps_updated_at(model_factory):
    model = model_factory(name="bump")
    _raw("UPDATE agent_models SET updated_at = '2000-01-01T00:00:00Z' WHERE id = %s", [model.pk])
    # The trigger ignores the value written and stamps the transaction time.
    (updated,) = _raw("SELECT updated_at FROM agent_models WHERE id = %s", [model.pk])[0]
    assert updated.year > 2000
    _raw("UPDATE agent_models SET context_window = 4096 WHERE id = %s", [model.pk])
    (later,) = _raw("SELECT updated_at FROM agent_models WHERE id = %s", [model.pk])[0]
    assert later >= updated


def test_deleting_a_user_in_sql_cascades_to_their_tokens(user):
    api_token_create(user=user)
    _raw("DELETE FROM users_groups WHERE user_id = %s", [user.pk])
    _raw("DELETE FROM users WHERE id = %s", [user.pk])
    assert ApiToken.objects.count() == 0


def test_orm_delete_of_a_user_is_cascaded_by_the_database(user):
    api_token_create(user=user)
    user.delete()
    assert ApiToken.objects.count() == 0


def test_platform_settings_is_a_singleton_in_the_database():
    PlatformSettings.objects.get_or_create(id=1)
    with pytest.raises(IntegrityError, match="achilles_platformsettings_singleton"), transaction.atomic():
        _raw(
            "INSERT INTO platform_settings (id, timezone, weekly_token_budget, agent_iteration_cap, "
            "agent_stale_after_seconds, platform_prompt, web_search_enabled, web_search_url, "
            "answer_reserve_tokens, retrieval_top_k, cache_ttl_seconds, agent_run_token_cap) "
            "VALUES (2, 'UTC', 1, 1, 1, '', false, '', 1, 1, 1, 1)"
        )


def test_vector_extension_is_installed_by_a_migration():
    assert _raw("SELECT extname FROM pg_extension WHERE extname = 'vector'") == [("vector",)]


def test_token_foreign_key_cascades_at_database_level():
    (rule,) = _raw("SELECT confdeltype FROM pg_constraint WHERE conrelid = 'api_tokens'::regclass AND contype = 'f'")[0]
    assert rule == "c"


def test_updated_at_never_precedes_created_at_within_one_transaction():
    # given a transaction that started a while before the row is created and updated
    with transaction.atomic():
        _raw("SELECT pg_sleep(0.05)")
        _raw(
            "INSERT INTO agent_models (name, provider, kind, context_window, is_default, options) "
            "VALUES ('late', 'builtin', 'chat', 8192, false, '{}')"
        )
        _raw("UPDATE agent_models SET context_window = 4096 WHERE name = 'late'")
        created, updated = _raw("SELECT created_at, updated_at FROM agent_models WHERE name = 'late'")[0]
    assert updated >= created
