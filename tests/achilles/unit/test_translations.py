"""The English catalogs (locale/en/LC_MESSAGES): complete, compiled from their sources, and holding every
text the templates, the code and the pages' scripts mark for translation.

The .mo files are committed (the platform needs no GNU gettext to run); ``make messages`` updates the
.po from the sources and compiles them. These tests read the files only: a text added without a
translation, a .po edited without compiling, a placeholder lost in translation each fail here.
"""

from __future__ import annotations

import ast
import gettext
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LOCALE = ROOT / "locale" / "en" / "LC_MESSAGES"
DOMAINS = ("django", "djangojs")
# Where the marked texts live: the apps' code and templates, the shared templates, the scripts.
APPS = ("achilles", "agents", "conversations", "hub", "knowledge", "usage")
SKIP_DIRS = {"migrations", "demo_corpus", "__pycache__"}


def _unquote(parts: list[str]) -> str:
    return "".join(ast.literal_eval('"' + p + '"') for p in parts)


def po_entries(path: Path) -> list[dict]:
    """The entries of a .po file: msgid, msgstr, flags (the header, msgid "", left out)."""
    entries, entry, field = [], None, None
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        line = line.strip()
        if not line:
            if entry and entry["msgid"]:
                entries.append(entry)
            entry, field = None, None
            continue
        entry = entry or {"msgid": "", "msgstr": "", "flags": set(), "_parts": {"msgid": [], "msgstr": []}}
        if line.startswith("#,"):
            entry["flags"] |= {f.strip() for f in line[2:].split(",")}
        elif line.startswith("#"):
            continue
        elif line.startswith(("msgid ", "msgstr ")):
            field, rest = line.split(" ", 1)
            entry["_parts"][field] = [rest[1:-1]]
        elif line.startswith('"') and field:
            entry["_parts"][field].append(line[1:-1])
        if field:
            entry[field] = _unquote(entry["_parts"][field])
    return entries


def _files(pattern: str):
    for app in APPS:
        for path in (ROOT / app).rglob(pattern):
            if not SKIP_DIRS & set(path.relative_to(ROOT).parts):
                yield path


def _template_texts() -> set[str]:
    texts = set()
    # templates/admin/: copies of Django's admin templates, whose texts are Django's (in Django's catalogs)
    own = [p for p in (ROOT / "templates").rglob("*.html") if "admin" not in p.relative_to(ROOT / "templates").parts]
    paths = own + list(_files("*.html"))
    for path in paths:
        source = path.read_text(encoding="utf-8")
        texts |= set(re.findall(r'{% translate "([^"]+)" %}', source))
        for block in re.findall(r"{% blocktranslate[^%]*%}(.*?){% endblocktranslate %}", source, flags=re.S):
            texts.add(re.sub(r"{{ (\w+) }}", r"%(\1)s", block))
    return texts


def _python_texts() -> set[str]:
    texts = set()
    for path in _files("*.py"):
        source = path.read_text(encoding="utf-8")
        texts |= set(re.findall(r'\b(?:_|gettext|gettext_lazy)\("((?:[^"\\]|\\.)+)"\)', source))
    return {ast.literal_eval('"' + t + '"') for t in texts}


def _script_texts() -> set[str]:
    texts = set()
    for path in (ROOT / "achilles" / "static" / "achilles").glob("*.js"):
        texts |= set(re.findall(r'\bgettext\("((?:[^"\\]|\\.)+)"\)', path.read_text(encoding="utf-8")))
    return {ast.literal_eval('"' + t + '"') for t in texts}


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_text_has_an_english_translation(domain):
    entries = po_entries(LOCALE / f"{domain}.po")
    assert len(entries) > 100
    assert [e["msgid"] for e in entries if not e["msgstr"].strip()] == []
    assert [e["msgid"] for e in entries if "fuzzy" in e["flags"]] == []


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_english_keeps_the_placeholders(domain):
    placeholder = re.compile(r"%\(\w+\)(?:\.\d)?[sdf]|%[sd]")
    for entry in po_entries(LOCALE / f"{domain}.po"):
        assert sorted(placeholder.findall(entry["msgid"])) == sorted(placeholder.findall(entry["msgstr"])), entry


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_compiled_catalog_is_not_stale(domain):
    # given the committed .mo, as Django loads it
    with open(LOCALE / f"{domain}.mo", "rb") as handle:
        compiled = gettext.GNUTranslations(handle)
    # then every entry of the .po reads the same from it (run `make messages` after editing a .po)
    stale = [e["msgid"] for e in po_entries(LOCALE / f"{domain}.po") if compiled.gettext(e["msgid"]) != e["msgstr"]]
    assert stale == []


@pytest.mark.parametrize(
    ("domain", "found"),
    [("django", lambda: _template_texts() | _python_texts()), ("djangojs", _script_texts)],
    ids=["templates-and-code", "scripts"],
)
def test_every_marked_text_is_in_the_catalog(domain, found):
    catalog = {e["msgid"] for e in po_entries(LOCALE / f"{domain}.po")}
    texts = found()
    assert len(texts) > 100
    # a text missing here: run `make messages` and translate it in the .po
    assert sorted(texts - catalog) == []
