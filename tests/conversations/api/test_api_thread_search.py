"""Thread search: over what was said in the user's own threads (PostgreSQL full text), not titles only."""

from urllib.parse import urlencode

import pytest

pytestmark = [pytest.mark.api, pytest.mark.django_db]


def _titles(client, q: str) -> list[str]:
    response = client.get("/api/conversations?" + urlencode({"q": q}))
    assert response.status_code == 200, response.content
    return [c["title"] for c in response.json()["items"]]


def test_a_thread_is_found_by_words_of_its_messages(user, user_factory, asgi_client, conversation_factory):
    # given: a thread whose title says nothing of its content, another thread, and a stranger's
    conversation_factory(
        user,
        [("user", "Сколько дней отпуска?"), ("assistant", "Отпуск составляет 28 календарных дней [1].")],
        title="Вопрос",
    )
    conversation_factory(user, [("user", "Как оформить командировку?")], title="Командировка")
    stranger = user_factory(username="stranger")
    conversation_factory(stranger, [("user", "28 календарных дней — это много?")], title="Чужая")
    client = asgi_client(user)
    # then: «28 календарных» finds the thread by its answer (stemmed: «календарный» too)
    assert _titles(client, "28 календарных") == ["Вопрос"]
    assert _titles(client, "календарный отпуск") == ["Вопрос"]
    # titles still count, and nothing of another user's threads is found
    assert _titles(client, "командир") == ["Командировка"]
    assert _titles(client, "много") == []
    assert _titles(client, "такого нигде нет") == []


def test_a_search_with_a_nul_is_refused_not_a_500(user, asgi_client):
    # the platform refuses a NUL in a query string (PostgreSQL text cannot hold one) before the search
    assert asgi_client(user).get("/api/conversations?" + urlencode({"q": "a\x00b"})).status_code == 422
