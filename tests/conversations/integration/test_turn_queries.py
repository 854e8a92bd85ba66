"""How many SQL statements one chat turn costs the web process (issue 15: CPU per turn).

Pinned so that a change adding a round trip to every turn shows up here, not in production. The
Knowledge Store is the stub (its own statements are the facade's business, bench/knowledge);
savepoints are the test transaction's, not the turn's; the platform settings row comes from the
Redis cache (a miss reads it once a minute), so its SELECT is left out; so do the admins' source
labels (``knowledge_source_policies``, cached until a policy changes: test_source_labels_cache).
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conversations.conftest import candidate, result, run_turn, search_then

pytestmark = [pytest.mark.integration]

_SQL: list[str] = []  # the statements of the last turn measured, in full


def _turn_statements(user, content, conversation_id=None):
    with CaptureQueriesContext(connection) as captured:
        outcome = run_turn(user, content, conversation_id=conversation_id)
    assert outcome.done is not None, outcome.events
    statements = [
        q["sql"]
        for q in captured.captured_queries
        if "SAVEPOINT" not in q["sql"]
        and '"platform_settings"' not in q["sql"]
        and '"knowledge_source_policies"' not in q["sql"]
    ]
    _SQL[:] = statements
    return outcome, [" ".join(sql.split()[:2]) + " " + sql.split()[2].split(".")[0] for sql in statements]


def test_a_grounding_turn_runs_three_statements(engine, user):
    engine.ks.default = result(candidate(1, "Отпуск составляет 28 дней."))
    engine.script(
        *search_then("отпуск", "Отпуск составляет 28 дней [1]."),
        *search_then("отпуск", "Отпуск составляет 28 дней [1]."),
    )

    first, new_thread = _turn_statements(user, "Сколько дней отпуска?")
    start, finalize = _SQL[1], _SQL[2]
    _, same_thread = _turn_statements(user, "А ещё?", conversation_id=first.conversation_id)

    # start: the identity's groups, then the default model, the thread and the question in one
    # statement (this failed with four: the default model was a statement of its own); finalize:
    # one statement — lock + bump the thread (UPDATE), the answer, its citations, its trace (each
    # was several statements in a transaction: this failed with eight).
    assert new_thread == [
        'SELECT g."name" FROM',
        "WITH model AS",
        "WITH thread AS",
    ]
    for step in ('FROM "agent_models"', 'INSERT INTO "conversations"', 'INSERT INTO "messages"'):
        assert step in start, start
    for step in (  # the names are spelled from the models' _meta (quoted)
        'UPDATE "conversations"',
        'INSERT INTO "messages"',
        'INSERT INTO "message_citations"',
        'INSERT INTO "retrieval_trace"',
    ):
        assert step in finalize, finalize
    # A follow-up locks the thread (with its selected model) and reads the history instead.
    assert len(same_thread) == 6, same_thread
    assert same_thread[-1] == "WITH thread AS"
    assert same_thread[1].startswith('SELECT "conversations"')
    assert same_thread[3].startswith('SELECT "messages"."id"')  # the thread's tree: the history is its branch


def test_a_conversation_turn_writes_no_trace_nor_citations(engine, user):
    engine.script(["Привет!"])
    engine.ks.empty = True

    _, statements = _turn_statements(user, "Привет")

    # 6 before the start's and the finalize's writes were one statement each, 4 before the default
    # model was read with the start
    assert len(statements) == 3, statements
    assert statements[-1] == "WITH thread AS"
    assert "retrieval_trace" not in _SQL[-1] and "message_citations" not in _SQL[-1], _SQL[-1]
    assert not any("retrieval_trace" in s or "message_citations" in s for s in statements)
