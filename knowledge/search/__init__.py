"""Hybrid search (KS-3), one concern per module: ``embedding`` (the query's vector and the default
model's memo), ``lexical`` and ``vector`` (the two candidate lists), ``withheld`` (the question's
topic and the hidden chunks relevant to it), ``hybrid`` (the orchestration: validation, fusion,
details)."""
