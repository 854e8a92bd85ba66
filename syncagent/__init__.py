"""The on-prem sync agent: polls the hub, carries commands into Jira Server/DC, keeps the mirror fresh.

It imports no Django (``tests/syncagent`` enforces it) so that ``syncagent/`` ships alone
as a publication artifact. ``python -m syncagent`` runs it; ``python -m syncagent.run`` (or
``python syncagent/run.py``) runs it under the launcher that updates and rolls back.
"""
