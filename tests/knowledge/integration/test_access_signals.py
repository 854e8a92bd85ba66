"""register_access and the trust decay job (KS-8)."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from achilles.errors import NotFound, ValidationFailed
from knowledge import facade
from knowledge.models import AccessSignal, Record
from knowledge.services import trust_decay
from knowledge.tasks import trust_decay_task
from tests.knowledge.conftest import identity_of

pytestmark = pytest.mark.django_db

EMPLOYEE = identity_of("everyone", "user:1", user_id=1)


def test_answer_and_click_are_recorded(make_record):
    a = make_record("a.md", "Текст.")
    facade.register_access(a, EMPLOYEE, "answer", message_id="m-1")
    facade.register_access(a, EMPLOYEE, "click", message_id="m-1")
    signals = list(AccessSignal.objects.order_by("kind").values_list("kind", "principal", "message_id"))
    assert signals == [("answer", "user:1", "m-1"), ("click", "user:1", "m-1")]
    assert Record.objects.get(pk=a).last_accessed_at is not None


def test_an_answer_counts_once_per_message(make_record):
    a = make_record("a.md", "Текст.")
    for _ in range(3):
        facade.register_access(a, EMPLOYEE, "answer", message_id="m-1")
    facade.register_access(a, EMPLOYEE, "answer", message_id="m-2")
    assert AccessSignal.objects.filter(kind="answer").count() == 2


def test_clicks_count_each_time(make_record):
    a = make_record("a.md", "Текст.")
    facade.register_access(a, EMPLOYEE, "click", message_id="m-1")
    facade.register_access(a, EMPLOYEE, "click", message_id="m-1")
    assert AccessSignal.objects.filter(kind="click").count() == 2


@pytest.mark.p0
def test_a_record_the_identity_cannot_see_is_not_found(make_record):
    a = make_record("a.md", "Текст.", acl=["group:finance"])
    with pytest.raises(NotFound):
        facade.register_access(a, EMPLOYEE, "click")
    assert AccessSignal.objects.count() == 0


def test_unknown_kind_is_refused(make_record):
    a = make_record("a.md", "Текст.")
    with pytest.raises(ValidationFailed):
        facade.register_access(a, EMPLOYEE, "view")


def test_trust_decays_without_use_and_recovers_on_access(make_record):
    a = make_record("a.md", "Текст.")
    b = make_record("b.md", "Другой текст.")
    assert trust_decay() == 0  # fresh content: trust stays 1.0
    with time_machine.travel(timezone.now() + timedelta(days=180), tick=False):
        trust_decay_task()
        assert Record.objects.get(pk=a).trust_score == pytest.approx(0.5, abs=0.01)
        facade.register_access(b, EMPLOYEE, "answer", message_id="m")
        trust_decay()
        assert Record.objects.get(pk=b).trust_score == pytest.approx(1.0, abs=0.01)
    with time_machine.travel(timezone.now() + timedelta(days=3650), tick=False):
        trust_decay()
        assert Record.objects.get(pk=a).trust_score == pytest.approx(0.1)
