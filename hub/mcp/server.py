"""The hub's MCP server (HUB-16): the seed's 14 tools plus ``knowledge_search``, on the official SDK.

Every tool acts as the caller — the owner of the personal API token the transport was given
(``Authorization: Bearer ach_…`` over HTTP, ``ACHILLES_TOKEN`` over stdio) — through the same
services and selectors as REST, so the permission checks are the same (the hub permission;
``settings_set`` staff only; the project ACL of ``hub.access``: an issue you may not read is left out
of ``issues`` and not found by ``issue`` and ``notes_set``, and ``knowledge_search`` filters by it too). A domain error comes back as an ``is_error`` result rendered by the
platform's text renderer (``achilles.errors.render_text``: ``code: message``) — the code and detail the
REST API answers with (a 422's validation text); a crash is logged and answered generically.

The ORM runs on worker threads (``sync_to_async(thread_sensitive=False)``): a tool never blocks the
event loop, and the long ``batch_wait`` awaits the hub's coroutine instead of holding a thread.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.db import close_old_connections
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError, WithJsonSchema

from achilles import __version__
from achilles.compat import mcp_call_arguments
from achilles.errors import NotAuthenticated, ValidationFailed, render_text
from achilles.services import api_token_authenticate
from hub import selectors, services
from hub.command_contract import COMMAND_JSON_SCHEMA
from hub.contracts import IssueFilters
from hub.mcp import texts
from knowledge.facade import Identity, search

logger = logging.getLogger(__name__)

AUTHOR = "claude"  # SHALL (seed 004): commands queued over MCP are authored by `claude`
REFRESH_WAIT_MINUTES = 10
TOOL_NAMES = (
    "issues",
    "issue",
    "notes_set",
    "batch_create",
    "batch_status",
    "batch_wait",
    "batches",
    "command_retry",
    "batch_cancel",
    "refresh",
    "agent_status",
    "sync_log",
    "settings_get",
    "settings_set",
    "knowledge_search",
)

NOT_AUTHENTICATED = "Authentication credentials were not provided or are invalid."


@dataclass(frozen=True)
class Caller:
    """Who the current MCP request acts as: the raw personal token, re-checked on every tool call
    (a token revoked or a user deactivated mid-session stops working at once, stdio included)."""

    token: str


current_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("hub_mcp_caller", default=None)


# ---------------------------------------------------------------- running hub code as the caller


def _resolve_user():
    caller = current_caller.get()
    user = api_token_authenticate(caller.token) if caller is not None else None
    if user is None:
        raise NotAuthenticated(NOT_AUTHENTICATED)
    return user


def _user_tz(user) -> dt.tzinfo:
    """The caller's time zone, else the organisation's (``User.effective_timezone``, as the web pages
    show times). Reads platform settings: call it on a worker thread."""
    try:
        return ZoneInfo(user.effective_timezone() or "UTC")
    except Exception:  # an unknown zone name must not break an answer
        return texts.UTC


def _resolve_user_and_tz():
    user = _resolve_user()
    return user, _user_tz(user)


def _in_thread(fn: Callable[[], Any]):
    """Run ORM code on a worker thread and give its connection back (the pool reuses it)."""

    def call():
        try:
            return fn()
        finally:
            close_old_connections()

    return sync_to_async(call, thread_sensitive=False)()


def error_result(exc: Exception, *, tool: str = "") -> CallToolResult:
    """The platform's text rendering of an error (``code: message``, ``achilles.errors.render_text``):
    a domain error carries the REST answer's code and detail; a crash is logged and stays generic."""
    return CallToolResult(
        content=[TextContent(type="text", text=render_text(exc, context=f"mcp {tool}".strip()))], is_error=True
    )


async def _answer(render: Callable[[Any, dt.tzinfo], str]) -> str | CallToolResult:
    """``render(user, tz)`` on a worker thread; a domain error becomes the error result."""

    def work():
        user = _resolve_user()
        return render(user, _user_tz(user))

    try:
        return await _in_thread(work)
    except Exception as exc:  # every failure is an error result in the platform's words, never a crash
        return error_result(exc)


# ---------------------------------------------------------------- tool descriptions and schemas


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline_refs(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


def commands_schema() -> dict[str, Any]:
    """The command contract's JSON Schema (``hub.command_contract``) as the ``commands`` argument's schema, its
    ``$defs`` inlined (they would otherwise point at the tool schema's root). The schema is advertised,
    not enforced by the SDK: the hub validates, so the error text is the REST 422's."""
    item = _inline_refs(COMMAND_JSON_SCHEMA, COMMAND_JSON_SCHEMA.get("$defs", {}))
    item.pop("discriminator", None)  # its mapping names $defs entries that no longer exist
    return {"type": "array", "minItems": 1, "items": item}


BATCH_CREATE_DESCRIPTION = """Создать пакет команд для Jira (выполнит агент синхронизации).

Команды (поле `type`): ensure_issue {project, summary, issue_type, labels, fields},
ensure_fields {key, fields}, ensure_link {key, link_type, direction: outward|inward, other_key},
ensure_sprint {key, sprint}, ensure_comment {key, body}, ensure_transition {key, status},
refresh {keys} | {full: true}. "key": "$N" — задача, созданная командой N этого пакета.
Хаб сам добавляет в конец refresh всех затронутых задач (3 команды → 4).

ВАЖНО: ensure_issue должна нести `labels` с базовой меткой проекта (AWPCA): хаб и агент метки сами
не добавляют, и задача без неё выпадает из базовой JQL и из зеркала.
Пакет с ensure_issue без этой метки хаб не принимает (ошибка валидации).

Ответ: id пакета, оценка (estimate_seconds, в минутах) и число команд; результат — batch_wait."""


def _read_only(title: str) -> ToolAnnotations:
    return ToolAnnotations(
        title=title, read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )


def _write(title: str, *, idempotent: bool = False, destructive: bool = False) -> ToolAnnotations:
    return ToolAnnotations(
        title=title,
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=True,
    )


# ---------------------------------------------------------------- the server


def validation_failed(exc: ValidationError) -> ValidationFailed:
    """Pydantic's rejection of tool arguments as the platform's 422: the first field named, each
    problem as ``field: message`` (the rejected values are not echoed)."""
    errors = exc.errors()
    fields = [".".join(str(p) for p in e["loc"]) or "arguments" for e in errors]
    if len(errors) == 1:
        message = errors[0]["msg"]
    else:
        message = "; ".join(f"{f}: {e['msg']}" for f, e in zip(fields, errors, strict=True))
    return ValidationFailed(message, field=fields[0] if fields else None)


class HubServer(MCPServer):
    """The SDK's server with the spec's error codes: an unknown tool or prompt is JSON-RPC -32602
    (Invalid params), invalid tool arguments are an error result in the platform's words."""

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None, context: Any = None) -> Any:
        if self._prompt_manager.get_prompt(name) is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown prompt: {name}")
        return await super().get_prompt(name, arguments, context)

    async def _handle_call_tool(self, ctx: Any, params: Any) -> Any:
        if self._tool_manager.get_tool(params.name) is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        context = Context(request_context=ctx, mcp_server=self, input_params=params, subscriptions=self._subscriptions)
        try:
            return await self.call_tool(params.name, params.arguments or {}, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return error_result(validation_failed(exc.__cause__), tool=params.name)
            # A crash (the SDK wraps it) is logged and answered generically; a ToolError says its own text.
            if isinstance(exc, UnexpectedToolError):
                return error_result(exc.__cause__ or exc, tool=params.name)
            return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)


def build_server() -> MCPServer:
    """A fresh server with every tool registered (one per HTTP event loop, one per stdio process)."""
    server = HubServer(
        name="achilles-hub",
        version=__version__,
        title="Achilles Hub",
        instructions=(
            "Зеркало Jira и очередь команд хаба Achilles: чтение задач из зеркала, заметки, пакеты "
            "команд (их выполняет агент синхронизации), статус агента; плюс поиск по базе знаний."
        ),
        log_level="WARNING",
    )

    @server.tool(annotations=_read_only("Задачи из зеркала Jira"), structured_output=False)
    async def issues(
        project: Annotated[str | None, Field(description="ключ проекта, например AURORA")] = None,
        status: Annotated[str | None, Field(description="статус в Jira")] = None,
        assignee: Annotated[str | None, Field(description="исполнитель (логин Jira)")] = None,
        sprint: Annotated[str | None, Field(description="спринт (название)")] = None,
        label: Annotated[str | None, Field(description="метка")] = None,
        fact_status: Annotated[str | None, Field(description="статус по факту (заметки хаба)")] = None,
        due_from: Annotated[dt.date | None, Field(description="срок не раньше (ГГГГ-ММ-ДД)")] = None,
        due_to: Annotated[dt.date | None, Field(description="срок не позже (ГГГГ-ММ-ДД)")] = None,
        overdue: Annotated[bool | None, Field(description="только просроченные")] = None,
        text: Annotated[str | None, Field(description="подстрока ключа или темы")] = None,
        updated_since: Annotated[dt.datetime | None, Field(description="обновлены в Jira не раньше (ISO 8601)")] = None,
        limit: Annotated[int, Field(ge=1, le=500, description="сколько строк (по умолчанию 50, до 500)")] = 50,
    ) -> str | CallToolResult:
        """Задачи из зеркала Jira с фильтрами (как GET /api/hub/issues): таблица — ключ, тема, статус, срок,
        исполнитель, спринт, статус по факту."""
        filters = IssueFilters(
            project=project,
            status=status,
            assignee=assignee,
            sprint=sprint,
            label=label,
            fact_status=fact_status,
            due_from=due_from,
            due_to=due_to,
            overdue=overdue,
            text=text,
            updated_since=updated_since,
        )
        return await _answer(
            lambda user, tz: texts.issues_text(
                selectors.issues_list(user=user, filters=filters, limit=limit), limit=limit
            )
        )

    @server.tool(annotations=_read_only("Карточка задачи"), structured_output=False)
    async def issue(
        key: Annotated[str, Field(description="ключ задачи, например AURORA-1538")],
    ) -> str | CallToolResult:
        """Карточка задачи из зеркала: поля, связи (обе стороны, тип и направление), заметки хаба, последние
        команды и 5 последних комментариев."""
        return await _answer(lambda user, tz: texts.issue_text(selectors.issue_card(user=user, key=key), tz=tz))

    @server.tool(annotations=_write("Заметки по задаче", idempotent=True), structured_output=False)
    async def notes_set(
        key: Annotated[str, Field(description="ключ задачи")],
        ctx: Context,
        fact_status: Annotated[str | None, Field(description="статус по факту")] = None,
        note: Annotated[str | None, Field(description="заметка")] = None,
        next_step: Annotated[str | None, Field(description="следующий шаг")] = None,
        owner: Annotated[str | None, Field(description="ответственный")] = None,
    ) -> str | CallToolResult:
        """Заметки хаба по задаче (в Jira не уходят): любое подмножество полей fact_status, note, next_step,
        owner; пустая строка очищает поле. Ответ — обновлённые заметки."""
        given = {"fact_status": fact_status, "note": note, "next_step": next_step, "owner": owner}
        fields = {name: value for name, value in given.items() if value is not None}
        # The SDK drops arguments the schema does not name; pass them on so the service refuses an
        # unknown field with the same text as REST instead of silently ignoring it.
        raw = mcp_call_arguments(ctx)
        fields |= {name: value for name, value in raw.items() if name != "key" and name not in given}
        return await _answer(
            lambda user, tz: texts.notes_text(services.notes_set(user=user, key=key, fields=fields), tz=tz)
        )

    @server.tool(
        description=BATCH_CREATE_DESCRIPTION, annotations=_write("Пакет команд для Jira"), structured_output=False
    )
    async def batch_create(
        title: Annotated[str, Field(description="название пакета")],
        commands: Annotated[
            list[dict[str, Any]], WithJsonSchema(commands_schema()), Field(description="команды по контракту commands")
        ],
    ) -> str | CallToolResult:
        return await _answer(
            lambda user, tz: texts.batch_created_text(
                services.batch_create(user=user, title=title, commands=commands, default_author=AUTHOR), title=title
            )
        )

    @server.tool(annotations=_read_only("Статус пакета"), structured_output=False)
    async def batch_status(id: Annotated[int, Field(description="id пакета")]) -> str | CallToolResult:  # noqa: A002
        """Статусы команд пакета, ошибки и оценка остатка."""
        return await _answer(lambda user, tz: texts.batch_text(selectors.batch_status(user=user, batch_id=id), tz=tz))

    @server.tool(annotations=_read_only("Дождаться пакета"), structured_output=False)
    async def batch_wait(
        id: Annotated[int, Field(description="id пакета")],  # noqa: A002
        timeout_minutes: Annotated[
            float,
            # Bounds advertised; the hub checks them itself so the error is the REST 422's text.
            WithJsonSchema({"type": "number", "exclusiveMinimum": 0, "maximum": 60, "default": 10}),
            Field(description="сколько ждать, минут (больше 0 и не больше 60)"),
        ] = 10,
    ) -> str | CallToolResult:
        """Дождаться завершения пакета (или таймаута, не больше 60 минут): ответ как у batch_status. Если клиент
        обрывает долгие вызовы (около минуты), ждите отрезками (timeout_minutes: 0.9) и вызывайте снова."""
        return await _wait(id, timeout_minutes)

    @server.tool(annotations=_read_only("Последние пакеты"), structured_output=False)
    async def batches(
        limit: Annotated[int, Field(ge=1, le=200, description="сколько пакетов")] = 20,
    ) -> str | CallToolResult:
        """Последние пакеты со статусом."""
        return await _answer(lambda user, tz: texts.batches_text(selectors.batches_list(user=user, limit=limit), tz=tz))

    @server.tool(annotations=_write("Повторить команду"), structured_output=False)
    async def command_retry(id: Annotated[int, Field(description="id команды")]) -> str | CallToolResult:  # noqa: A002
        """Поставить команду заново — новым пакетом (с refresh её задачи)."""
        return await _answer(
            lambda user, tz: texts.command_retry_text(
                services.command_retry(user=user, command_id=id, default_author=AUTHOR), command_id=id
            )
        )

    @server.tool(annotations=_write("Отменить пакет", idempotent=True, destructive=True), structured_output=False)
    async def batch_cancel(id: Annotated[int, Field(description="id пакета")]) -> str | CallToolResult:  # noqa: A002
        """Отменить команды пакета, ещё стоящие в очереди. Команды, уже взятые агентом, будут выполнены;
        остановить такую — POST /api/hub/commands/N/cancel с force: true."""
        return await _answer(
            lambda user, tz: texts.batch_cancel_text(services.batch_cancel(user=user, batch_id=id), tz=tz)
        )

    @server.tool(annotations=_write("Обновить зеркало из Jira", idempotent=True), structured_output=False)
    async def refresh(
        keys: Annotated[list[str] | None, Field(description="ключи задач")] = None,
        full: Annotated[bool, Field(description="полная синхронизация вместо keys")] = False,
        wait: Annotated[bool, Field(description=f"дождаться результата (до {REFRESH_WAIT_MINUTES} мин)")] = False,
    ) -> str | CallToolResult:
        """Перечитать задачи из Jira в зеркало (keys) или всё (full). Без wait — id поставленного пакета;
        с wait — итог пакета, как у batch_wait."""

        def queue(user, tz):
            return services.refresh(user=user, keys=keys, full=full, default_author=AUTHOR)

        created = await _answer(lambda user, tz: queue(user, tz))
        if isinstance(created, CallToolResult):
            return created
        if not wait:
            return texts.refresh_queued_text(created)
        return await _wait(created.id, REFRESH_WAIT_MINUTES)

    @server.tool(annotations=_read_only("Статус агента синхронизации"), structured_output=False)
    async def agent_status() -> str | CallToolResult:
        """Агент синхронизации: онлайн/офлайн, версия, текущая команда, довыданные команды, 429 за сутки,
        версия настроек, публикация, обновление, запускатель."""
        return await _answer(lambda user, tz: texts.agent_status_text(selectors.agent_status(user=user), tz=tz))

    @server.tool(annotations=_read_only("Журнал синхронизаций"), structured_output=False)
    async def sync_log(
        limit: Annotated[int, Field(ge=1, le=200, description="сколько запусков")] = 20,
    ) -> str | CallToolResult:
        """Последние запуски синхронизации: вид, начало, конец, счётчики, ошибки, статус."""
        return await _answer(lambda user, tz: texts.sync_log_text(selectors.sync_log(user=user, limit=limit), tz=tz))

    @server.tool(annotations=_read_only("Настройки хаба"), structured_output=False)
    async def settings_get(
        key: Annotated[str | None, Field(description="ключ настройки; без него — все")] = None,
    ) -> str | CallToolResult:
        """Текущее значение настройки хаба (или всех) и settings_version."""
        return await _answer(
            lambda user, tz: texts.settings_text(
                selectors.settings_get(user=user, key=key), settings_version=selectors.settings_version_get()
            )
        )

    @server.tool(annotations=_write("Изменить настройку хаба", idempotent=True), structured_output=False)
    async def settings_set(
        key: Annotated[str, Field(description="ключ настройки")],
        value: Annotated[Any, Field(description="новое значение (JSON)")],
    ) -> str | CallToolResult:
        """Изменить настройку хаба (только персонал): ответ — новая settings_version; агент получит настройки
        при следующем обращении."""
        return await _answer(
            lambda user, tz: texts.settings_set_text(key, services.settings_set(user=user, key=key, value=value))
        )

    @server.tool(annotations=_read_only("Поиск по базе знаний"), structured_output=False)
    async def knowledge_search(
        query: Annotated[str, Field(description="вопрос или ключевые слова")],
        k: Annotated[int, Field(ge=1, le=50, description="сколько фрагментов (1–50)")] = 8,
    ) -> str | CallToolResult:
        """Поиск по базе знаний компании с вашими правами доступа: фрагменты с источниками для цитирования и,
        если есть подходящие закрытые документы, — где запросить доступ."""

        def render(user, tz):
            result = search(query, Identity.for_user(user), k=k)
            return texts.knowledge_text(result.candidates, result.withheld, is_empty=result.is_empty)

        return await _answer(render)

    return server


async def _wait(batch_id: int, timeout_minutes: float) -> str | CallToolResult:
    """``batch_wait`` without holding a thread: the user is resolved on a worker thread, then the hub's
    own coroutine waits (Redis pub/sub) for as long as it takes."""
    try:
        user, tz = await _in_thread(_resolve_user_and_tz)
        # Its short reads run thread-sensitive: give them a thread of this call's own (as Django
        # does per request) and hand that thread's connection back to the pool at the end.
        async with ThreadSensitiveContext():
            try:
                view = await services.batch_wait_async(user=user, batch_id=batch_id, timeout_minutes=timeout_minutes)
            finally:
                await sync_to_async(close_old_connections)()
        return texts.batch_text(view, tz=tz)
    except Exception as exc:
        return error_result(exc, tool="batch_wait")
