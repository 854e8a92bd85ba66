"""Model instances from the rows of plain statements (the hot paths that skip the ORM's compile).

A plain ``cursor.execute`` returns column values as the driver loads them; the ORM would also run
each field's ``from_db_value`` (a JSONField arrives as text with Django's loaders). ``row_model``
does both, so an instance built here equals the one ``Model.objects.get`` would return.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from django.db import connection, models

M = TypeVar("M", bound=models.Model)


def row_model(model: type[M], fields: Sequence[models.Field], values: Sequence[Any]) -> M:
    """``model`` from ``values`` in the order of ``fields`` (concrete fields, e.g. ``_meta.concrete_fields``)."""
    loaded = [
        field.from_db_value(value, None, connection) if value is not None and hasattr(field, "from_db_value") else value
        for field, value in zip(fields, values, strict=True)
    ]
    return model.from_db(connection.alias, [f.attname for f in fields], loaded)


def table(model: type[models.Model]) -> str:
    """``model``'s table, quoted."""
    return connection.ops.quote_name(model._meta.db_table)


def concrete_field(model: type[models.Model], name: str) -> models.Field:
    """``model``'s field ``name``, one with a column of its own."""
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field) and field.column, f"{model.__name__}.{name} has no column"
    return field


def column_name(model: type[models.Model], name: str) -> str:
    """The column of ``model``'s field ``name`` (a foreign key's ``…_id``), unquoted."""
    return str(concrete_field(model, name).column)


def column(model: type[models.Model], name: str) -> str:
    """The column of ``model``'s field ``name`` (a foreign key's ``…_id``), quoted."""
    return connection.ops.quote_name(column_name(model, name))


def m2m_through(model: type[models.Model], name: str) -> type[models.Model]:
    """The table model behind ``model``'s many-to-many field ``name``."""
    field = model._meta.get_field(name)
    assert isinstance(field, models.ManyToManyField)
    return field.remote_field.through  # type: ignore[return-value]
