"""Confluence storage format → Markdown on realistic page bodies (pure)."""

import pytest

from knowledge.connectors.confluence.storage import storage_to_markdown

pytestmark = pytest.mark.unit


def md(storage: str, **kwargs) -> str:
    return storage_to_markdown(storage, **kwargs).markdown


def test_headings_paragraphs_and_entities():
    assert md("<h2>Деплой</h2><p>Сначала&nbsp;<strong>сборка</strong>, потом <em>выкладка</em>.</p>") == (
        "## Деплой\n\nСначала **сборка**, потом *выкладка*."
    )


def test_code_macro_keeps_language_and_cdata_verbatim():
    storage = (
        '<ac:structured-macro ac:name="code" ac:schema-version="1"><ac:parameter ac:name="language">bash'
        "</ac:parameter><ac:plain-text-body><![CDATA[make run\nif [ $a < 3 ]; then echo <ok>; fi]]>"
        "</ac:plain-text-body></ac:structured-macro>"
    )
    assert md(storage) == "```bash\nmake run\nif [ $a < 3 ]; then echo <ok>; fi\n```"


@pytest.mark.parametrize("kind,label", [("info", "Info"), ("note", "Note"), ("warning", "Warning"), ("tip", "Tip")])
def test_panel_macros_become_labelled_quotes(kind, label):
    storage = (
        f'<ac:structured-macro ac:name="{kind}"><ac:parameter ac:name="title">Важно</ac:parameter>'
        "<ac:rich-text-body><p>Не трогать прод в пятницу.</p></ac:rich-text-body></ac:structured-macro>"
    )
    assert md(storage) == f"> **{label}: Важно**\n>\n> Не трогать прод в пятницу."


def test_expand_macro_keeps_its_body():
    storage = (
        '<ac:structured-macro ac:name="expand"><ac:parameter ac:name="title">Подробнее</ac:parameter>'
        "<ac:rich-text-body><p>Скрытый текст</p><ul><li>пункт</li></ul></ac:rich-text-body></ac:structured-macro>"
    )
    assert md(storage) == "> **Подробнее**\n>\n> Скрытый текст\n>\n> - пункт"


def test_table_with_status_and_jira_macros():
    storage = (
        "<table><colgroup><col /><col /></colgroup><tbody><tr><th><p>Задача</p></th><th>Статус</th></tr>"
        '<tr><td><ac:structured-macro ac:name="jira"><ac:parameter ac:name="server">JIRA</ac:parameter>'
        '<ac:parameter ac:name="key">OPS-12</ac:parameter></ac:structured-macro></td>'
        '<td><ac:structured-macro ac:name="status"><ac:parameter ac:name="colour">Green</ac:parameter>'
        '<ac:parameter ac:name="title">ГОТОВО</ac:parameter></ac:structured-macro></td></tr></tbody></table>'
    )
    assert md(storage) == "| Задача | Статус |\n| --- | --- |\n| OPS-12 | [ГОТОВО] |"


def test_links_to_pages_attachments_and_users_are_text_and_collected():
    storage = (
        '<p>См. <ac:link><ri:page ri:space-key="OPS" ri:content-title="Регламент" />'
        "<ac:plain-text-link-body><![CDATA[регламент]]></ac:plain-text-link-body></ac:link>, "
        '<ac:link><ri:page ri:content-title="Глоссарий" /></ac:link>, '
        '<ac:link><ri:attachment ri:filename="plan.pdf" /></ac:link> и спросите '
        '<ac:link><ri:user ri:userkey="8a7f" /></ac:link>.</p>'
    )
    converted = storage_to_markdown(storage, space_key="DEV", user_name={"8a7f": "Иван Петров"}.get)
    assert converted.markdown == "См. регламент, Глоссарий, plan.pdf и спросите @Иван Петров."
    assert converted.links.pages == [("OPS", "Регламент"), ("DEV", "Глоссарий")]
    assert converted.links.attachments == ["plan.pdf"]
    assert converted.links.users == ["8a7f"]


def test_images_task_lists_and_nested_lists():
    storage = (
        '<p><ac:image ac:alt="схема"><ri:attachment ri:filename="arch.png" /></ac:image></p>'
        "<ac:task-list><ac:task><ac:task-id>1</ac:task-id><ac:task-status>complete</ac:task-status>"
        "<ac:task-body>собрать</ac:task-body></ac:task><ac:task><ac:task-id>2</ac:task-id>"
        "<ac:task-status>incomplete</ac:task-status><ac:task-body>выложить</ac:task-body></ac:task></ac:task-list>"
        "<ol><li>первый<ul><li>вложенный</li></ul></li><li><p>второй</p></li></ol>"
    )
    assert md(storage) == ("![схема](arch.png)\n\n- [x] собрать\n- [ ] выложить\n\n1. первый\n  - вложенный\n2. второй")


def test_silent_macros_and_unknown_macros():
    storage = (
        '<ac:structured-macro ac:name="toc" /><p>Текст</p>'
        '<ac:structured-macro ac:name="custom-thing"><ac:rich-text-body><p>внутри</p></ac:rich-text-body>'
        "</ac:structured-macro>"
    )
    assert md(storage) == "Текст\n\nвнутри"


def test_layouts_and_broken_markup_do_not_raise():
    storage = (
        "<ac:layout><ac:layout-section ac:type='two_equal'><ac:layout-cell><p>Левая</p></ac:layout-cell>"
        "<ac:layout-cell><p>Правая <b>незакрыто</ac:layout-cell></ac:layout-section></ac:layout>"
    )
    text = md(storage)
    assert "Левая" in text and "Правая" in text
    assert md("") == ""
