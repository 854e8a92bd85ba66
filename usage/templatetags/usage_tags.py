from decimal import Decimal

from django import template

register = template.Library()


@register.filter
def tokens(value) -> str:
    """1234567 → «1 234 567» (a narrow no-break space between thousands)."""
    try:
        return f"{int(value):,}".replace(",", "\u202f")
    except (TypeError, ValueError):
        return "—"


@register.filter
def money(value) -> str:
    """A cost with cents (more digits when it is under a cent); None → «—» (no prices)."""
    if value is None:
        return "—"
    amount = Decimal(value)
    if amount and abs(amount) < Decimal("0.01"):
        return f"{amount:.4f}"
    return f"{amount:,.2f}".replace(",", "\u202f")
