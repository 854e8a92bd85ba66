"""The demo Confluence site (``python -m emulators.confluence --demo``): space ``KB`` «База знаний
«Борей»», a page tree in storage format (code macro, info panel, table, ``ac:link``, Jira issue macro,
a DOCX attachment built here), and a restricted branch «Кадры» (group ``hr`` and the user ``admin``;
its children inherit the restriction).

Users: ``admin`` (groups it, finance; administers KB), ``demo`` (it), ``kadry`` (hr), and the
connector's account ``achilles-sync`` (confluence-administrators, hr) with the personal access token
``SYNC_TOKEN`` (override with ``--token``). PATs ``admin-pat`` and ``demo-pat`` for trying by hand.
"""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from xml.sax.saxutils import escape

from emulators.confluence.store import ConfluenceStore

SYNC_USER = "achilles-sync"
SYNC_TOKEN = "confluence-sync-pat"
SPACE = "KB"


def docx(paragraphs: list[str]) -> bytes:
    """A minimal, valid Word document (WordprocessingML) with one paragraph per string."""
    body = "".join(f'<w:p><w:r><w:t xml:space="preserve">{escape(p)}</w:t></w:r></w:p>' for p in paragraphs)
    files = {
        "[Content_Types].xml": '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/word/document.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
        "_rels/.rels": '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
        'Target="word/document.xml"/></Relationships>',
        "word/document.xml": '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        f"<w:body>{body}</w:body></w:document>",
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            z.writestr(name, text)
    return out.getvalue()


HOME = """<p>Здесь собраны инструкции компании «Борей»: ИТ, отпуск и кадровые документы.</p>
<ac:structured-macro ac:name="info" ac:schema-version="1"><ac:rich-text-body>
<p>Не нашли ответ — спросите в чате Achilles или напишите в ServiceDesk.</p>
</ac:rich-text-body></ac:structured-macro>
<p>Чаще всего ищут: <ac:link><ri:page ri:content-title="Подключение к VPN" ri:space-key="KB" />
<ac:plain-text-link-body><![CDATA[как подключиться к VPN]]></ac:plain-text-link-body></ac:link>.</p>"""

IT = """<p>Раздел ИТ-службы: доступы, VPN, дежурства.</p>
<ac:structured-macro ac:name="children" ac:schema-version="2" />"""

VPN = """<h2>Клиент</h2>
<p>Корпоративный VPN работает на WireGuard. Установите клиент WireGuard и импортируйте профиль
с портала vpn.borey.local (вход по доменной учётной записи). Адрес шлюза — gw.borey.ru, порт 51820/UDP.</p>
<ac:structured-macro ac:name="code" ac:schema-version="1">
<ac:parameter ac:name="language">ini</ac:parameter>
<ac:plain-text-body><![CDATA[[Interface]
Address = 10.44.0.17/32
DNS = 10.44.0.1

[Peer]
Endpoint = gw.borey.ru:51820
AllowedIPs = 10.0.0.0/8]]></ac:plain-text-body></ac:structured-macro>
<ac:structured-macro ac:name="note" ac:schema-version="1"><ac:rich-text-body>
<p>Профиль действует 90&nbsp;дней, потом его нужно перевыпустить.</p>
</ac:rich-text-body></ac:structured-macro>
<h2>Если не подключается</h2>
<p>Проверьте, что время на ноутбуке синхронизировано, и перезапустите туннель. Не помогло —
заявка в ServiceDesk с категорией «VPN».</p>"""

DUTY = """<p>Дежурный инженер отвечает на инциденты P1 в течение 15 минут круглосуточно.</p>
<table><tbody>
<tr><th>Приоритет</th><th>Реакция</th><th>Решение</th></tr>
<tr><td>P1</td><td>15 минут</td><td>4 часа</td></tr>
<tr><td>P2</td><td>1 час</td><td>1 рабочий день</td></tr>
<tr><td>P3</td><td>4 часа</td><td>5 рабочих дней</td></tr>
</tbody></table>
<p>Перевод дежурств на новую систему оповещений ведётся в задаче
<ac:structured-macro ac:name="jira" ac:schema-version="1">
<ac:parameter ac:name="server">Jira Борей</ac:parameter>
<ac:parameter ac:name="key">AURORA-9001</ac:parameter></ac:structured-macro>.</p>"""

VACATION = """<p>Ежегодный оплачиваемый отпуск — 28 календарных дней; его можно делить на части,
одна из которых не короче 14 дней.</p>
<p>Заявление подаётся не позднее чем за 2 недели: заполните шаблон
<ac:link><ri:attachment ri:filename="Заявление на отпуск.docx" /></ac:link> и отправьте руководителю.</p>"""

HR = """<ac:structured-macro ac:name="warning" ac:schema-version="1"><ac:rich-text-body>
<p>Раздел доступен только сотрудникам HR. Не пересылайте эти страницы.</p>
</ac:rich-text-body></ac:structured-macro>"""

GRADES = """<p>Вилки пересмотрены с 1 апреля 2026 года (индексация 8&nbsp;%).</p>
<table><tbody>
<tr><th>Грейд</th><th>Вилка, ₽</th></tr>
<tr><td>G3 (специалист)</td><td>140 000–200 000</td></tr>
<tr><td>G4 (старший специалист)</td><td>210 000–290 000</td></tr>
<tr><td>G5 (ведущий, тимлид)</td><td>300 000–380 000</td></tr>
</tbody></table>
<p>Решение о переходе между грейдами принимает комиссия по итогам полугодового ревью (июнь и декабрь).</p>"""

RESERVE = """<p>В кадровый резерв 2026 года включены 12 сотрудников; список утверждён 20 марта.
Программа развития — наставник, проект и обучение за счёт компании до 150 000&nbsp;₽.</p>"""


def build_demo(store: ConfluenceStore | None = None, *, sync_token: str = SYNC_TOKEN) -> ConfluenceStore:
    s = store if store is not None else ConfluenceStore()
    start = dt.datetime.now(s.tz).replace(second=0, microsecond=0) - dt.timedelta(days=3)
    s.set_now(start)
    s.add_user(
        "admin",
        email="admin@borey.ru",
        display_name="Администратор",
        groups=["it", "finance"],
        password="admin-confluence",
    )
    s.add_user(
        "demo", email="demo@borey.ru", display_name="Демо Пользователь", groups=["it"], password="demo-confluence"
    )
    s.add_user(
        "kadry", email="kadry@borey.ru", display_name="Ольга Кадрова", groups=["hr"], password="kadry-confluence"
    )
    s.add_user(
        SYNC_USER,
        email="achilles-sync@borey.ru",
        display_name="Achilles (синхронизация)",
        groups=["confluence-administrators", "hr"],
    )
    s.add_token(sync_token, SYNC_USER)
    s.add_token("admin-pat", "admin")
    s.add_token("demo-pat", "demo")
    s.add_space(SPACE, "База знаний «Борей»", permissions={"groups": ["confluence-users"], "admins": ["admin"]})
    home = s.add_page(SPACE, "База знаний «Борей»", HOME, author="admin")
    s.advance(hours=2)
    it = s.add_page(SPACE, "ИТ", IT, parent_id=home, author="admin")
    s.advance(minutes=10)
    s.add_page(SPACE, "Подключение к VPN", VPN, parent_id=it, author="demo")
    s.advance(minutes=10)
    s.add_page(SPACE, "Дежурства и инциденты", DUTY, parent_id=it, author="admin")
    s.advance(hours=5)
    vacation = s.add_page(SPACE, "Отпуск", VACATION, parent_id=home, author="kadry")
    s.add_attachment(
        vacation,
        "Заявление на отпуск.docx",
        docx(
            [
                "Генеральному директору ООО «Борей»",
                "Заявление",
                "Прошу предоставить мне ежегодный оплачиваемый отпуск с ___ по ___ на ___ календарных дней.",
            ]
        ),
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        author="kadry",
    )
    s.advance(days=1)
    hr = s.add_page(SPACE, "Кадры", HR, parent_id=home, author="kadry")
    s.add_page(SPACE, "Грейды и зарплатные вилки 2026", GRADES, parent_id=hr, author="kadry")
    s.advance(minutes=30)
    s.add_page(SPACE, "Кадровый резерв", RESERVE, parent_id=hr, author="kadry")
    s.set_read_restriction(hr, users=["admin"], groups=["hr"])
    s.advance(days=1)
    s.update_page(
        vacation, body=VACATION + "<p>С 2026 года отпуск можно оформить и в мобильном приложении.</p>", author="kadry"
    )
    s.set_now(None)
    return s
