"""The every-page checks themselves (tests/browser/pagecheck.py) on small pages made for them: each
fault they are meant to catch is caught, and a page without them passes."""

from __future__ import annotations

import pytest

from tests.browser.pagecheck import axe_violations, layout_problems

pytestmark = [pytest.mark.browser, pytest.mark.p1]

STYLE = "<style>body{margin:0;font:15px/1.5 sans-serif} .scroll{overflow-x:auto}</style>"
LONG = "Сводка за неделю: закрыто четырнадцать задач проекта, в работе шесть, просрочены две. " * 4


def _at_375(page, body: str) -> list[str]:
    page.set_viewport_size({"width": 375, "height": 812})
    page.set_content(f"<!doctype html><html lang=ru><head><title>t</title>{STYLE}</head><body>{body}</body></html>")
    return layout_problems(page)


def test_a_page_that_fits_passes(page):
    body = f"<main><h1>Агенты</h1><p>{LONG}</p><div class=scroll><pre>{'x' * 400}</pre></div>"
    body += "<label>Имя <input type=text></label></main>"
    assert _at_375(page, body) == []


def test_an_element_wider_than_the_screen_is_caught(page):
    problems = _at_375(page, "<main><div style='width:600px'>широкий блок</div></main>")
    assert any(p.startswith("wider than the screen: div") for p in problems), problems


def test_text_squeezed_into_a_narrow_column_is_caught(page):
    table = f"<table><tr><td style='width:300px'>дата и время запуска</td><td class=output>{LONG}</td></tr></table>"
    problems = _at_375(page, f"<main>{table}</main>")
    assert any("text squeezed into" in p and "td.output" in p for p in problems), problems


def test_an_empty_stretch_taller_than_the_content_needs_is_caught(page):
    problems = _at_375(page, "<main><p>вверху</p><div style='height:2000px'></div><p>внизу</p></main>")
    assert any("with nothing in them" in p for p in problems), problems


def test_a_field_covered_clipped_or_too_small_is_caught(page):
    body = (
        "<main><p>поля</p>"
        "<div style='position:relative'><input id=under type=text>"
        "<div style='position:absolute;inset:0;background:#fff'>крышка</div></div>"
        "<div style='height:20px;overflow:hidden'><p style='margin:0;height:20px'>строка</p><textarea id=clipped></textarea></div>"
        "<input id=tiny type=text style='width:4px;height:4px;padding:0;border:0'>"
        "</main>"
    )
    problems = _at_375(page, body)
    assert any("covered or clipped: input#under" in p for p in problems), problems
    assert any("covered or clipped: textarea#clipped" in p for p in problems), problems
    assert any("too small to use: input#tiny" in p for p in problems), problems


def test_axe_reports_a_serious_violation(page):
    page.set_content(
        "<!doctype html><html lang=ru><head><title>t</title></head><body><main>"
        "<p style='color:#aaa;background:#fff'>бледный текст</p><input type=text></main></body></html>"
    )
    found = axe_violations(page)
    assert any(v.startswith("color-contrast (serious)") for v in found), found
    assert any(v.startswith("label (critical)") for v in found), found
