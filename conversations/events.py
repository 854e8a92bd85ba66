"""The events of a chat turn, shared by both transports (SSE ``event:`` names, websocket ``event`` field)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TokenEvent:
    text: str
    name = "token"

    def payload(self) -> dict:
        return {"text": self.text}


@dataclass(frozen=True)
class DoneEvent:
    message_id: int
    conversation_id: str
    citations: list[dict]
    withheld_hint: dict | None
    tokens_used: int
    model: str
    name = "done"

    def payload(self) -> dict:
        body = {
            "message_id": self.message_id,
            "conversation_id": self.conversation_id,
            "citations": self.citations,
            "tokens_used": self.tokens_used,
            "model": self.model,
        }
        if self.withheld_hint is not None:
            body["withheld_hint"] = self.withheld_hint
        return body


@dataclass(frozen=True)
class ErrorEvent:
    detail: object
    code: str
    message_id: int | None = None
    conversation_id: str | None = None
    name = "error"

    def payload(self) -> dict:
        return {
            "detail": self.detail,
            "code": self.code,
            "message_id": self.message_id,
            "conversation_id": self.conversation_id,
        }


Event = TokenEvent | DoneEvent | ErrorEvent
