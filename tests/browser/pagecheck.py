"""Checks run inside a page: its layout on a narrow screen, and axe-core's accessibility rules.

``layout_problems`` lists, in words, what makes a page unusable on a phone: an element that sticks
out of the screen (outside any scroll container of its own), text squeezed into a column a few
characters wide, a stretch of the page with nothing in it taller than most of the screen (a page
taller than its content needs), and a form field nobody can reach or see (clipped, covered, zero
size, off to the side). ``axe_violations`` runs axe-core (npm, pinned; ``make axe-deps`` installs it
into ``var/axe-core``) and returns its violations of serious or critical impact.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
AXE_JS = REPO / "var" / "axe-core" / "node_modules" / "axe-core" / "axe.min.js"

LAYOUT_JS = r"""
() => {
  const W = innerWidth, H = innerHeight, problems = [];
  const name = e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "")
    + (typeof e.className === "string" && e.className.trim() ? "." + e.className.trim().split(/\s+/).join(".") : "");
  const clippers = e => {
    const out = [];
    for (let p = e.parentElement; p && p !== document.body && p !== document.documentElement; p = p.parentElement) {
      const s = getComputedStyle(p);
      if (s.overflowX !== "visible" || s.overflowY !== "visible") out.push(p);
    }
    return out;
  };
  const root = document.documentElement;
  if (root.scrollWidth > W) problems.push(`the page scrolls sideways: ${root.scrollWidth}px wide`);

  // 1. wider than the screen (outside a scroll container), and text squeezed into a narrow column
  for (const e of document.body.querySelectorAll("*")) {
    const r = e.getBoundingClientRect();
    if (!r.width && !r.height) continue;
    if ((r.right > W + 1 || r.left < -1) && !clippers(e).some(p => getComputedStyle(p).overflowX !== "visible"))
      problems.push(`wider than the screen: ${name(e)} (${Math.round(r.left)}…${Math.round(r.right)} px)`);
    const own = [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join("").trim();
    if (own.length > 40 && r.width < 120 && r.height > 160)
      problems.push(`text squeezed into ${Math.round(r.width)} px: ${name(e)} (${Math.round(r.height)} px tall)`);
  }

  // 2. empty stretches: the page's visible content (text, controls, images), each piece cut to the
  // scroll containers around it, in page coordinates; no gap between pieces taller than 60 % of the
  // screen (a page taller than its content needs)
  const pieces = [];
  const add = (rect, e) => {
    let top = rect.top, bottom = rect.bottom;
    if (rect.width <= 1 || bottom - top <= 1) return;
    for (const p of clippers(e)) {
      const c = p.getBoundingClientRect(); top = Math.max(top, c.top); bottom = Math.min(bottom, c.bottom);
    }
    if (bottom > top) pieces.push([top + scrollY, bottom + scrollY]);
  };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.textContent.trim() || !n.parentElement) continue;
    const range = document.createRange(); range.selectNodeContents(n);
    for (const rect of range.getClientRects()) add(rect, n.parentElement);
  }
  for (const e of document.body.querySelectorAll("input, textarea, select, button, img, svg, canvas, hr, iframe"))
    for (const rect of e.getClientRects()) add(rect, e);
  pieces.sort((a, b) => a[0] - b[0]);
  const height = root.scrollHeight;
  let reached = 0, worst = 0, at = 0;
  for (const [top, bottom] of pieces) {
    if (top - reached > worst) { worst = top - reached; at = reached; }
    reached = Math.max(reached, bottom);
  }
  if (height > H && height - reached > worst) { worst = height - reached; at = reached; }
  if (worst > 0.6 * H) problems.push(`${Math.round(worst)} px with nothing in them from y=${Math.round(at)} (page ${height} px)`);

  // 3. form fields nobody can see or reach: each rendered field, scrolled to, is hit at its centre
  for (const e of document.querySelectorAll("input:not([type=hidden]), textarea, select")) {
    if (!e.getClientRects().length) continue;  // not rendered: display:none, a closed <details>
    const s = getComputedStyle(e);
    if (s.visibility === "hidden" || Number(s.opacity) === 0) { problems.push(`invisible field: ${name(e)}`); continue; }
    // a box that clips without scroll bars (overflow hidden/clip) scrolls for scrollIntoView, never for a person
    const fixed = clippers(e).filter(p => /hidden|clip/.test(getComputedStyle(p).overflowX + getComputedStyle(p).overflowY));
    e.scrollIntoView({block: "center", inline: "center"});
    if (fixed.some(p => p.scrollTop || p.scrollLeft)) {
      fixed.forEach(p => { p.scrollTop = 0; p.scrollLeft = 0; });
      problems.push(`field covered or clipped: ${name(e)} (outside a box that does not scroll)`); continue;
    }
    const r = e.getBoundingClientRect();
    if (r.width < 8 || r.height < 8) { problems.push(`field too small to use: ${name(e)} (${Math.round(r.width)}×${Math.round(r.height)})`); continue; }
    if (r.left < -1 || r.right > W + 1) { problems.push(`field off the screen: ${name(e)}`); continue; }
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    const label = e.closest("label") || (e.id && document.querySelector(`label[for="${e.id}"]`));
    if (!hit || !(hit === e || e.contains(hit) || (label && label.contains(hit))))
      problems.push(`field covered or clipped: ${name(e)} (under ${hit ? name(hit) : "nothing"})`);
  }
  scrollTo(0, 0);
  return problems;
}
"""

# Inside a page: the chat's log is the scroll container, at its end, with the message field in view.
CHAT_AT_LATEST_JS = r"""
() => {
  const log = document.getElementById("log"), q = document.getElementById("q");
  const last = [...log.querySelectorAll(".msg")].pop();
  const l = log.getBoundingClientRect(), r = q.getBoundingClientRect(), m = last.getBoundingClientRect();
  return {
    pageHeight: document.documentElement.scrollHeight, scrollY: scrollY, viewport: innerHeight,
    logScrolls: log.scrollHeight > log.clientHeight && getComputedStyle(log).overflowY !== "visible",
    logAtEnd: log.scrollHeight - log.scrollTop - log.clientHeight <= 2,
    inputInView: r.top >= 0 && r.bottom <= innerHeight,
    lastInView: m.bottom > l.top && m.bottom <= l.bottom + 2,
  };
}
"""


def layout_problems(page) -> list[str]:
    """What makes the open page unusable at its viewport's width (empty when nothing)."""
    return page.evaluate(LAYOUT_JS)


@cache
def _axe_source() -> str:
    if not AXE_JS.exists():
        raise AssertionError(f"axe-core is not installed at {AXE_JS}: run `make axe-deps` (.ci/run does when missing)")
    return AXE_JS.read_text(encoding="utf-8")


def axe_violations(page, *, impacts: tuple[str, ...] = ("serious", "critical")) -> list[str]:
    """axe-core's violations of the given impacts on the open page, one line each with its nodes.

    The script goes in through the DevTools protocol (``page.evaluate``), which the page's
    Content-Security-Policy does not govern: an inline ``<script>`` would be refused, as it should.
    """
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(_axe_source() + "\n;undefined")
    result = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.map(n => n.target.join(' ') + ' — ' + (n.failureSummary || '').split('\\n').slice(1).join(' '))}))"
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} — " + "; ".join(v["nodes"][:5])
        for v in result
        if v["impact"] in impacts
    ]
