"""Joins the two 0004 migrations (audit_events and the per-run token cap) into one history."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("achilles", "0004_agent_run_token_cap"), ("achilles", "0004_audit_events")]

    operations = []
