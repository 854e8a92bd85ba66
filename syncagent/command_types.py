"""The command types of the hub ↔ sync-agent protocol (HUB-5), in one place: the hub's command contract
(``hub.command_contract``) and its table's CHECK (``hub.models``) read them, and so does the sync
agent's executor. Plain data, no imports — the hub may import it, the sync agent ships it."""

COMMAND_TYPES = (
    "ensure_issue",
    "ensure_fields",
    "ensure_link",
    "ensure_sprint",
    "ensure_comment",
    "ensure_transition",
    "refresh",
)
