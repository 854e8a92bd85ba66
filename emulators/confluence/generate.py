"""A large generated Confluence site for benchmarks (``python -m emulators.confluence --generate N``).

``N`` pages in two spaces (``ENG`` and ``OPS``, 3 : 1), each a tree: home → sections → topics →
pages. Bodies are storage-format XHTML of about 250–450 words of Russian-like prose under ``h2``
headings, and, at fixed strides, a table, a code macro, an info/note panel, an ``ac:link`` to an
earlier page and a Jira issue macro. A few branches are view-restricted (groups ``hr`` and
``finance``; one of them nested under another restricted one; one restricted to a user the sync
account is not, so the account cannot see it); a handful of pages carry a DOCX or CSV attachment.
Deterministic for a seed. Users ``user0`` … ``user49`` (e-mail ``userN@bench.local``) write the
pages; the sync account is ``achilles-sync`` (groups ``hr`` and ``finance``) with the given PAT.
"""

from __future__ import annotations

import datetime as dt
import random
from xml.sax.saxutils import escape

from emulators.confluence.demo import SYNC_USER, docx
from emulators.confluence.store import ConfluenceStore

SPACES = (("ENG", "Инженерия", 3), ("OPS", "Эксплуатация", 1))
USERS = 50
SECTIONS = 10  # per space
TOPICS = 10  # per section
SYLLABLES = ("ка", "ро", "ми", "на", "те", "ло", "ва", "ст", "пр", "ор", "ен", "ди", "за", "ко", "ли", "мо", "пе", "ту")
COMMON = (
    "и",
    "в",
    "на",
    "для",
    "по",
    "при",
    "если",
    "сервер",
    "доступ",
    "заявка",
    "сотрудник",
    "отдел",
    "процесс",
    "проект",
    "команда",
    "релиз",
    "отпуск",
    "политика",
    "инцидент",
    "база",
    "данных",
    "клиент",
    "срок",
    "правило",
)


class _Text:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.vocabulary = sorted(
            {"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(6000)}
        )

    def words(self, n: int) -> str:
        rng = self.rng
        out = [rng.choice(COMMON) if rng.random() < 0.3 else rng.choice(self.vocabulary) for _ in range(n)]
        return " ".join(out)

    def sentence(self) -> str:
        text = self.words(self.rng.randint(6, 16))
        return text[0].upper() + text[1:] + "."

    def paragraph(self, words: int) -> str:
        out, count = [], 0
        while count < words:
            s = self.sentence()
            out.append(s)
            count += s.count(" ") + 1
        return "<p>" + escape(" ".join(out)) + "</p>"


def _body(text: _Text, index: int, earlier: list[tuple[str, str]]) -> str:
    rng = text.rng
    parts: list[str] = [text.paragraph(rng.randint(40, 70))]
    for section in range(rng.randint(2, 4)):
        parts.append(f"<h2>{escape(text.words(rng.randint(2, 4)).capitalize())}</h2>")
        parts.append(text.paragraph(rng.randint(50, 90)))
        if section == 0 and index % 5 == 0:
            rows = "".join(
                f"<tr><td>{escape(text.words(1))}</td><td>{rng.randint(1, 999)}</td><td>{escape(text.words(3))}</td></tr>"
                for _ in range(rng.randint(3, 6))
            )
            parts.append(
                f"<table><tbody><tr><th>Параметр</th><th>Значение</th><th>Примечание</th></tr>{rows}</tbody></table>"
            )
        if section == 1 and index % 7 == 0:
            code = "\n".join(f"{text.words(1)} = {rng.randint(0, 9999)}" for _ in range(rng.randint(3, 8)))
            parts.append(
                '<ac:structured-macro ac:name="code" ac:schema-version="1">'
                '<ac:parameter ac:name="language">ini</ac:parameter>'
                f"<ac:plain-text-body><![CDATA[{code}]]></ac:plain-text-body></ac:structured-macro>"
            )
    if index % 4 == 0:
        kind = "info" if index % 8 == 0 else "note"
        parts.append(
            f'<ac:structured-macro ac:name="{kind}" ac:schema-version="1"><ac:rich-text-body>'
            f"{text.paragraph(20)}</ac:rich-text-body></ac:structured-macro>"
        )
    if earlier and index % 3 == 0:
        space, title = earlier[rng.randrange(len(earlier))]
        parts.append(
            f'<p>См. также <ac:link><ri:page ri:content-title="{escape(title, {chr(34): "&quot;"})}" '
            f'ri:space-key="{space}" /></ac:link>.</p>'
        )
    if index % 10 == 0:
        parts.append(
            '<p>Задача: <ac:structured-macro ac:name="jira" ac:schema-version="1">'
            f'<ac:parameter ac:name="key">OPS-{rng.randint(1, 9999)}</ac:parameter></ac:structured-macro></p>'
        )
    return "\n".join(parts)


def build_generated(
    store: ConfluenceStore | None = None, *, pages: int = 10000, sync_token: str = "bench-sync-pat", seed: int = 23
) -> ConfluenceStore:
    s = store if store is not None else ConfluenceStore()
    rng = random.Random(seed)
    text = _Text(rng)
    s.set_now(dt.datetime.now(s.tz).replace(second=0, microsecond=0) - dt.timedelta(minutes=pages + 60))
    users = [f"user{i}" for i in range(USERS)]
    for i, name in enumerate(users):
        groups = ["hr"] if i % 10 == 0 else ["finance"] if i % 10 == 1 else []
        s.add_user(name, email=f"{name}@bench.local", display_name=f"Сотрудник {i}", groups=groups)
    s.add_user(SYNC_USER, email="achilles-sync@bench.local", groups=["confluence-administrators", "hr", "finance"])
    s.add_token(sync_token, SYNC_USER)
    weights = sum(w for _, _, w in SPACES)
    made = 0
    earlier: list[tuple[str, str]] = []
    for number, (key, name, weight) in enumerate(SPACES):
        quota = pages - made if number == len(SPACES) - 1 else pages * weight // weights
        s.add_space(key, name, permissions={"groups": ["confluence-users"], "admins": ["user0"]})
        parents: list[str] = []
        for i in range(quota):
            title = f"{key} {i}: {text.words(rng.randint(2, 5))}"
            author = users[rng.randrange(USERS)]
            if i == 0:
                parent = None
            elif i <= SECTIONS:
                parent = parents[0]
            elif i <= SECTIONS + SECTIONS * TOPICS:
                parent = parents[1 + (i - SECTIONS - 1) % SECTIONS]
            else:
                parent = parents[SECTIONS + 1 + rng.randrange(min(SECTIONS * TOPICS, len(parents) - SECTIONS - 1))]
            page_id = s.add_page(key, title, _body(text, made, earlier), parent_id=parent, author=author)
            if len(parents) <= SECTIONS + SECTIONS * TOPICS:
                parents.append(page_id)
            earlier.append((key, title))
            if made % 400 == 17:
                s.add_attachment(
                    page_id,
                    f"Регламент {made}.docx",
                    docx([text.sentence() for _ in range(30)]),
                    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                    author=author,
                )
            elif made % 400 == 217:
                rows = "\n".join(f"{n},{text.words(1)},{rng.randint(1, 1000)}" for n in range(40))
                s.add_attachment(page_id, f"Данные {made}.csv", f"id,name,value\n{rows}\n".encode(), "text/csv")
            made += 1
            s.advance(minutes=1)
        # restricted branches: two sections (hr; finance), a topic inside the hr one (finance too:
        # readers need both), and one topic only its author may read (the sync account cannot)
        if len(parents) > SECTIONS + 3:
            s.set_read_restriction(parents[1], groups=["hr"], users=["user0"])
            s.set_read_restriction(parents[2], groups=["finance"])
            s.set_read_restriction(parents[SECTIONS + 1], groups=["finance"])
            s.set_read_restriction(parents[SECTIONS + 3], users=["user7"])
    s.set_now(None)
    return s
