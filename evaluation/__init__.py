"""`make eval`: a question set over the demo data, run through the chat engine as the ``demo`` user,
scored per model of the allow-list (docs/eval.md)."""
