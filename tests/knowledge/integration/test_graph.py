"""graph(): linked records up to depth 2, ACL-filtered, never through a hidden record (KS-5)."""

import pytest

from achilles.errors import NotFound, ValidationFailed
from knowledge import facade
from knowledge.services import record_link_create
from tests.knowledge.conftest import identity_of

pytestmark = pytest.mark.django_db

EMPLOYEE = identity_of("everyone", "user:1")


@pytest.fixture
def chain(make_record):
    """root → a → b;  root → secret → c;  d → root (incoming)."""
    ids = {
        name: make_record(f"{name}.md", f"Документ {name}.", acl=acl)
        for name, acl in [
            ("root", ["everyone"]),
            ("a", ["everyone"]),
            ("b", ["everyone"]),
            ("secret", ["group:finance"]),
            ("c", ["everyone"]),
            ("d", ["everyone"]),
        ]
    }
    record_link_create(from_record_id=ids["root"], to_record_id=ids["a"], link_type="relates")
    record_link_create(from_record_id=ids["a"], to_record_id=ids["b"], link_type="blocks")
    record_link_create(from_record_id=ids["root"], to_record_id=ids["secret"], link_type="relates")
    record_link_create(from_record_id=ids["secret"], to_record_id=ids["c"], link_type="relates")
    record_link_create(from_record_id=ids["d"], to_record_id=ids["root"], link_type="duplicates")
    return ids


def test_depth_one_returns_direct_neighbours_both_directions(chain):
    result = facade.graph(chain["root"], EMPLOYEE, depth=1)
    nodes = {n.record_id: n for n in result.nodes}
    assert set(nodes) == {chain["a"], chain["d"]}
    assert (nodes[chain["a"]].direction, nodes[chain["a"]].link_type, nodes[chain["a"]].depth) == ("out", "relates", 1)
    assert (nodes[chain["d"]].direction, nodes[chain["d"]].link_type) == ("in", "duplicates")
    assert all(n.via_record_id == chain["root"] for n in result.nodes)


def test_depth_two_goes_one_hop_further(chain):
    nodes = {n.record_id: n for n in facade.graph(chain["root"], EMPLOYEE, depth=2).nodes}
    assert set(nodes) == {chain["a"], chain["d"], chain["b"]}
    assert (nodes[chain["b"]].depth, nodes[chain["b"]].via_record_id, nodes[chain["b"]].link_type) == (
        2,
        chain["a"],
        "blocks",
    )


@pytest.mark.p0
def test_hidden_records_are_neither_shown_nor_traversed(chain):
    ids = {n.record_id for n in facade.graph(chain["root"], EMPLOYEE, depth=2).nodes}
    assert chain["secret"] not in ids and chain["c"] not in ids
    finance = identity_of("everyone", "group:finance")
    ids = {n.record_id for n in facade.graph(chain["root"], finance, depth=2).nodes}
    assert {chain["secret"], chain["c"]} <= ids


@pytest.mark.p0
def test_hidden_or_unknown_root_is_not_found(chain):
    with pytest.raises(NotFound):
        facade.graph(chain["secret"], EMPLOYEE)
    with pytest.raises(NotFound):
        facade.graph(10**9, EMPLOYEE)


@pytest.mark.parametrize("depth", [0, 3, -1, "1"])
def test_depth_is_one_or_two(chain, depth):
    with pytest.raises(ValidationFailed):
        facade.graph(chain["root"], EMPLOYEE, depth=depth)


def test_links_from_front_matter_are_created_by_ingest(tmp_path, user):
    from knowledge.ingest import ingest_path
    from knowledge.models import Record

    (tmp_path / "a.md").write_text("---\nacl: [everyone]\nlinks: [{to: b.md, type: blocks}]\n---\nА", encoding="utf-8")
    (tmp_path / "b.md").write_text("---\nacl: [everyone]\n---\nБ", encoding="utf-8")
    ingest_path(tmp_path)
    a = Record.objects.get(external_id="a.md")
    nodes = facade.graph(a.pk, EMPLOYEE).nodes
    assert [(n.link_type, n.direction) for n in nodes] == [("blocks", "out")]
