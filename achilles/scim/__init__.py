"""SCIM 2.0 provisioning (``/scim/v2/``): identity providers create, update, deactivate and group
accounts ahead of their first sign-in. The protocol is scim2-server's; the storage, the writes and
the token are ours. See docs/scim.md."""
