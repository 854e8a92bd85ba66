"""The generated benchmark site (``--generate N``) and the page-title index it relies on."""

from __future__ import annotations

import pytest

from emulators.confluence import ConfluenceStore
from emulators.confluence.demo import SYNC_USER
from emulators.confluence.generate import build_generated


def test_a_generated_site_has_its_tree_restrictions_bodies_and_attachments():
    store = build_generated(pages=420, sync_token="t", seed=1)
    pages = [c for c in store.content.values() if c["type"] == "page"]
    assert len(pages) == 420 and {c["space"] for c in pages} == {"ENG", "OPS"}
    assert sum(c["type"] == "attachment" for c in store.content.values()) >= 2
    restricted = [c["id"] for c in pages if c["read"]["users"] or c["read"]["groups"]]
    assert len(restricted) == 8  # four per space
    visible = store.visible_page_ids(SYNC_USER)
    # the sync account reads every branch but the one only user7 may read
    hidden = {c["id"] for c in pages} - visible
    assert hidden and all(store.can_view("user7", pid) for pid in hidden)
    body = " ".join(c["versions"][-1]["body"] for c in pages)
    for mark in ("<table>", 'ac:name="code"', "<ac:link>", 'ac:name="jira"', "<h2>"):
        assert mark in body


def test_page_titles_stay_unique_per_space_through_renames_and_the_trash():
    store = ConfluenceStore()
    store.add_space("S", "S")
    a = store.add_page("S", "A")
    b = store.add_page("S", "B")
    store.update_page(b, title="C")
    with pytest.raises(ValueError):
        store.add_page("S", "C")  # taken by a rename
    store.add_page("S", "B")  # freed by it
    store.delete_page(a)
    store.add_page("S", "A")  # freed by the trash
    store.add_space("T", "T")
    store.add_page("T", "A")  # another space
