"""``scripts/check_conventions.py`` (run by ``make lint``) finds a planted violation of each check,
lets the allowed forms pass, and the repository has none."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("check_conventions", ROOT / "scripts" / "check_conventions.py")
assert _spec is not None and _spec.loader is not None
checks = importlib.util.module_from_spec(_spec)
sys.modules["check_conventions"] = checks
_spec.loader.exec_module(checks)


def _found(path: str, source: str) -> list[tuple[int, str]]:
    return [(f.line, f.check) for f in checks.check_source(path, source)]


def test_a_private_attribute_of_a_library_object_is_found():
    source = "def take(pool):\n    return pool._getconn_unchecked(1.0)\n"
    assert _found("knowledge/search/hybrid.py", source) == [(2, "private-attribute")]


def test_private_attributes_of_self_cls_super_dunders_and_documented_names_pass():
    source = (
        "class A(B):\n"
        "    def f(self, other, Model, point):\n"
        "        self._x = cls._y = super()._z\n"
        "        return Model._meta, other.__class__, point._replace(x=1), self._x\n"
    )
    assert _found("agents/services/runs.py", source) == []


def test_the_compat_module_may_use_private_names_and_the_allow_list_is_exact():
    source = "def f(pool, cited):\n    return pool._getconn_unchecked(1), cited._has_stem('x')\n"
    assert _found("achilles/compat.py", source) == []
    # _has_stem is allowed in support.py only, and only that name
    assert _found("conversations/support.py", source) == [(2, "private-attribute")]
    assert _found("conversations/grounding.py", source) == [(2, "private-attribute"), (2, "private-attribute")]


def test_an_orm_call_in_an_api_a_view_or_a_page_is_found_and_not_in_a_selector():
    source = "from achilles.models import User\n\ndef f(request):\n    return User.objects.filter(pk=1).first()\n"
    for path in ("knowledge/api.py", "achilles/views.py", "usage/pages.py", "hub/api/tokens.py"):
        assert _found(path, source) == [(4, "orm-in-view")], path
    for path in ("knowledge/selectors.py", "agents/services/runs.py"):
        assert _found(path, source) == [], path


def test_the_repository_has_no_finding_and_the_script_says_so():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_conventions.py")], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_script_fails_on_a_finding(tmp_path):
    (tmp_path / "knowledge").mkdir()
    (tmp_path / "knowledge" / "api.py").write_text("def f():\n    return Record.objects.count()\n")
    findings = checks.check_tree(tmp_path)
    assert [str(f) for f in findings] == [
        "knowledge/api.py:2: orm-in-view: an ORM call in the HTTP layer: read through a selector, write through a service"
    ]


def test_a_private_name_read_or_written_through_getattr_or_setattr_is_found():
    source = (
        "def f(pool, user, self):\n"
        '    a = getattr(pool, "_getconn_unchecked", None)\n'
        '    setattr(user, "_prefetched_objects_cache", {})\n'
        '    return getattr(self, "_own", None), getattr(pool, "__class__"), getattr(pool, "closed")\n'
    )
    assert _found("achilles/services.py", source) == [(2, "private-attribute"), (3, "private-attribute")]
