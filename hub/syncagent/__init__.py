"""The on-prem sync agent: polls the hub, carries commands into Jira Server/DC, keeps the mirror fresh.

It imports no Django (``tests/hub/syncagent`` enforces it) so that ``hub/syncagent/`` ships alone
as a publication artifact. ``python -m hub.syncagent`` runs it; ``python -m hub.syncagent.run`` (or
``python hub/syncagent/run.py``) runs it under the launcher that updates and rolls back.
"""
