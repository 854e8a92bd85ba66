"""Where a chat turn's CPU goes, for ``bench/chat`` only (``ACHILLES_CHAT_SPANS=<file>``).

A turn's clock is in one phase at a time (auth → turn_start → model → ks → model → gate ⇄ relay …
→ finalize); ``switch`` charges the process CPU time used since the last switch to the phase that
is ending. It measures process CPU (every thread: the database steps run in a worker thread), so
the figures are a turn's own only when one turn runs at a time — the bench reads them at 1 stream.
At the end the phases are appended to the file as one JSON line.

Off (the default) every turn shares ``OFF``, whose methods do nothing: no clock read, no
allocation, no file. With the variable set, a turn is measured only while the file exists: the
clock's own reads cost CPU too, so the bench measures the turn's CPU with the file removed and
the breakdown with it present.
"""

from __future__ import annotations

import json
import os
import time

SPANS_FILE = os.environ.get("ACHILLES_CHAT_SPANS", "")


class TurnClock:
    def __init__(self, phase: str = "auth") -> None:
        self.phase = phase
        self.cpu: dict[str, float] = {}
        self.tokens = 0
        self._mark = time.process_time()

    def switch(self, phase: str) -> str:
        """Charge the CPU since the last switch to the current phase; enter ``phase``; return the
        phase left (to switch back to)."""
        now = time.process_time()
        self.cpu[self.phase] = self.cpu.get(self.phase, 0.0) + (now - self._mark)
        self._mark = now
        left, self.phase = self.phase, phase
        return left

    def token(self) -> None:
        self.tokens += 1

    def finish(self) -> None:
        self.switch("done")
        row = {"cpu_ms": {k: round(v * 1000, 3) for k, v in self.cpu.items()}, "model_tokens": self.tokens}
        with open(SPANS_FILE, "a", encoding="utf-8") as out:
            out.write(json.dumps(row) + "\n")


class _Off:
    """The clock when nothing measures: every call is a no-op."""

    phase = ""

    def switch(self, phase: str) -> str:
        return ""

    def token(self) -> None:
        pass

    def finish(self) -> None:
        pass


OFF = _Off()


Clock = TurnClock | _Off


def turn_clock() -> Clock:
    return TurnClock() if SPANS_FILE and os.path.exists(SPANS_FILE) else OFF
