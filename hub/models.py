"""Tables of this app."""
