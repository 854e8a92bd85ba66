import pytest

from achilles.platform import platform_settings, platform_settings_update

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_platform_settings_are_read_through_the_shared_cache(django_assert_num_queries):
    first = platform_settings()
    with django_assert_num_queries(0):
        again = platform_settings()
    assert again.timezone == first.timezone


def test_updating_settings_invalidates_the_cached_row():
    platform_settings()
    platform_settings_update(weekly_token_budget=1234)
    assert platform_settings().weekly_token_budget == 1234


def test_an_invalid_timezone_is_refused():
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        platform_settings_update(timezone="Mars/Olympus")


def test_user_timezone_falls_back_to_the_organisation(user_factory):
    platform_settings_update(timezone="Asia/Yekaterinburg")
    assert user_factory(username="tz-null").effective_timezone() == "Asia/Yekaterinburg"
    assert user_factory(username="tz-set", timezone="Europe/Berlin").effective_timezone() == "Europe/Berlin"
