"""Answers render as Markdown on the server, and nothing in a model's output can act in the page."""

import re

import pytest

from conversations.rendering import markdown_render

pytestmark = pytest.mark.unit

HOSTILE = """Ответ [1].

<script>window.pwned = 1</script>

<img src="x" onerror="window.pwned = 2">

[нажми](javascript:window.pwned=3) и <a href="javascript:window.pwned=4">ещё</a>

![логотип](https://evil.example/track.png)

[ссылка](data:text/html;base64,PHNjcmlwdD4=) <iframe src="https://evil.example"></iframe>

<div style="background:url(https://evil.example/x)" onclick="x()">блок</div>
"""


def _tags(html: str) -> set[str]:
    return {t.lower() for t in re.findall(r"<\s*([a-zA-Z0-9]+)", html)}


def test_headings_lists_tables_and_code_blocks():
    html = markdown_render(
        "## План\n\n- один\n- два\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n\n"
        "```python\nprint('[1]')\n```\n\nИтог **жирный** и `код`."
    )
    assert "<h2>План</h2>" in html and "<li>один</li>" in html
    assert "<table>" in html and "<th>a</th>" in html and "<td>1</td>" in html
    assert '<pre><code class="language-python">' in html and "print(&#x27;[1]&#x27;)" in html or "print('[1]')" in html
    assert "<strong>жирный</strong>" in html and "<code>код</code>" in html
    assert "cite" not in html  # a [1] inside code is code, not a marker


def test_a_hostile_answer_renders_inert():
    html = markdown_render(HOSTILE, message_id=7, markers={1})
    assert _tags(html) <= {"p", "a"}
    assert "<script" not in html and "<img" not in html and "<iframe" not in html and "<div" not in html
    real_tags = re.findall(r"<[a-z][^>]*>", html)  # escaped text (&lt;…&gt;) is only text
    assert not any(re.search(r"\s(on\w+|style|src)\s*=", tag) for tag in real_tags), real_tags
    assert re.findall(r'<a [^>]*href="([^"]*)"', html) == ["#src-7-1", "https://evil.example/track.png"]
    # the remote image is a link a person may follow, never loaded by itself
    assert (
        '<a href="https://evil.example/track.png" rel="noopener noreferrer nofollow">[изображение: логотип]</a>' in html
    )


def test_markers_link_to_source_cards_only_for_cited_numbers():
    html = markdown_render("Отпуск 28 дней [1], перенос [2]; массив a[3].", message_id=5, markers={1, 2})
    assert '<a class="cite" href="#src-5-1" data-cite="1">[1]</a>' in html
    assert '<a class="cite" href="#src-5-2" data-cite="2">[2]</a>' in html
    assert "a[3]" in html and "src-5-3" not in html


def test_code_class_is_only_a_language_name():
    html = markdown_render('```x" onclick="y\nz\n```')
    assert "onclick" not in html.split(">", 2)[1]
