"""The spend chart as server-rendered SVG: tokens per day, stacked by model or by source. Pure
(no ORM): points in, markup out; colours come from the stylesheet's classes (both themes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from django.utils.html import escape
from django.utils.translation import gettext as _

PALETTE_SIZE = 8
WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 720, 240, 56, 28, 12


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    css: str
    title: str


@dataclass(frozen=True)
class Chart:
    svg: str
    legend: list[tuple[str, str]]  # (css class, label)


def _compact(value: int) -> str:
    if value >= 1_000_000:
        return _("%(n).1f млн") % {"n": value / 1_000_000}
    if value >= 10_000:
        return _("%(n)d тыс.") % {"n": value // 1000}
    return f"{value:,}".replace(",", " ")


def stacked_bars(*, days: Sequence[date], points: Sequence[tuple[date, str, int]], labels: dict[str, str]) -> Chart:
    """``points``: (day, stack, tokens). One bar per day, one segment per stack, in a fixed order."""
    stacks = sorted({stack for _, stack, _ in points}, key=lambda s: (-sum(t for _, x, t in points if x == s), s))
    css = {stack: f"s{i % PALETTE_SIZE}" for i, stack in enumerate(stacks)}
    per_day: dict[date, dict[str, int]] = {d: {} for d in days}
    for day, stack, tokens in points:
        if day in per_day:
            per_day[day][stack] = per_day[day].get(stack, 0) + tokens
    peak = max((sum(v.values()) for v in per_day.values()), default=0) or 1
    plot_w, plot_h = WIDTH - LEFT - 8, HEIGHT - BOTTOM - TOP
    step = plot_w / max(1, len(days))
    gap = min(6.0, step * 0.2)
    bars: list[Bar] = []
    for i, day in enumerate(days):
        y = TOP + plot_h
        for stack in stacks:
            tokens = per_day[day].get(stack, 0)
            if not tokens:
                continue
            h = plot_h * tokens / peak
            y -= h
            title = f"{day:%d.%m} · {labels.get(stack, stack) or '—'}: {tokens:,}".replace(",", " ")
            bars.append(Bar(LEFT + i * step + gap / 2, y, max(1.0, step - gap), h, css[stack], title))
    caption = escape(_("Токены по дням"))
    parts = [
        f'<svg class="usage-chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{caption}">',
        f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - 8}" y2="{TOP + plot_h}"/>',
        f'<line class="grid" x1="{LEFT}" y1="{TOP}" x2="{WIDTH - 8}" y2="{TOP}"/>',
        f'<text class="tick" x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end">{escape(_compact(peak))}</text>',
        f'<text class="tick" x="{LEFT - 6}" y="{TOP + plot_h}" text-anchor="end">0</text>',
    ]
    for bar in bars:
        parts.append(
            f'<rect class="{bar.css}" x="{bar.x:.1f}" y="{bar.y:.1f}" width="{bar.width:.1f}" height="{bar.height:.1f}">'
            f"<title>{escape(bar.title)}</title></rect>"
        )
    every = max(1, len(days) // 8)
    for i, day in enumerate(days):
        if i % every == 0:
            x = LEFT + i * step + step / 2
            parts.append(f'<text class="tick" x="{x:.1f}" y="{HEIGHT - 8}" text-anchor="middle">{day:%d.%m}</text>')
    parts.append("</svg>")
    legend = [(css[s], labels.get(s, s) or "—") for s in stacks]
    return Chart(svg="".join(parts), legend=legend)
