"""Reusable migration operations for invariants the database must hold (SPEC §1).

Django 5.2 has no DB-level ``on_delete``: models declare ``on_delete=models.DO_NOTHING``
and a migration runs ``SetForeignKeyOnDelete`` so the constraint itself says
``ON DELETE CASCADE`` / ``SET NULL`` and an ORM delete is one DELETE the database cascades.
``AttachUpdatedAtTrigger`` hooks a table to the shared ``achilles_bump_updated_at()`` (the function
itself is SQL frozen in ``achilles/migrations/0002`` and ``0003``: migrations are history, so only
these reusable operations are importable).
"""

from __future__ import annotations

from django.db import migrations


class AttachUpdatedAtTrigger(migrations.operations.base.Operation):
    """Attach the ``updated_at`` bump trigger to ``table`` (reversible)."""

    reduces_to_sql = True
    reversible = True

    def __init__(self, table: str):
        self.table = table

    def state_forwards(self, app_label, state):
        pass

    def _name(self) -> str:
        return f"{self.table}_bump_updated_at"

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        schema_editor.execute(
            f'CREATE OR REPLACE TRIGGER {self._name()} BEFORE UPDATE ON "{self.table}" '
            "FOR EACH ROW EXECUTE FUNCTION achilles_bump_updated_at()"
        )

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        schema_editor.execute(f'DROP TRIGGER IF EXISTS {self._name()} ON "{self.table}"')

    def describe(self):
        return f"Attach updated_at trigger to {self.table}"

    def deconstruct(self):
        return (self.__class__.__qualname__, [self.table], {})


class SetForeignKeyOnDelete(migrations.operations.base.Operation):
    """Recreate the FK constraint of ``model.field`` with ``ON DELETE <action>`` at DB level."""

    reduces_to_sql = True
    reversible = True
    ACTIONS = {"CASCADE", "SET NULL", "RESTRICT", "NO ACTION"}

    def __init__(self, model_name: str, field_name: str, on_delete: str):
        if on_delete not in self.ACTIONS:
            raise ValueError(f"on_delete must be one of {sorted(self.ACTIONS)}")
        self.model_name = model_name
        self.field_name = field_name
        self.on_delete = on_delete

    def state_forwards(self, app_label, state):
        pass

    def _apply(self, app_label, schema_editor, state, action: str | None):
        model = state.apps.get_model(app_label, self.model_name)
        field = model._meta.get_field(self.field_name)
        table = model._meta.db_table
        column = field.column
        target = field.remote_field.model._meta
        target_column = field.target_field.column
        name = f"{table}_{column}_fk"[:63]
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(
                """
                SELECT con.conname FROM pg_constraint con
                JOIN pg_class rel ON rel.oid = con.conrelid
                JOIN pg_attribute att ON att.attrelid = rel.oid AND att.attnum = ANY(con.conkey)
                WHERE con.contype = 'f' AND rel.relname = %s AND att.attname = %s
                """,
                [table, column],
            )
            existing = [row[0] for row in cursor.fetchall()]
        for conname in existing:
            schema_editor.execute(f'ALTER TABLE "{table}" DROP CONSTRAINT "{conname}"')
        clause = f" ON DELETE {action}" if action else ""
        schema_editor.execute(
            f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" FOREIGN KEY ("{column}") '
            f'REFERENCES "{target.db_table}" ("{target_column}"){clause} DEFERRABLE INITIALLY DEFERRED'
        )

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        self._apply(app_label, schema_editor, to_state, self.on_delete)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        self._apply(app_label, schema_editor, from_state, None)

    def describe(self):
        return f"ON DELETE {self.on_delete} for {self.model_name}.{self.field_name}"

    def deconstruct(self):
        return (self.__class__.__qualname__, [self.model_name, self.field_name, self.on_delete], {})
