"""Every error code the platform answers with, in one registry (``ErrorCode``).

A code is the stable, machine-readable half of the one error shape ``{"detail", "code"}``
(``achilles/errors.py``): clients branch on it, so a code is added here, documented in the table of
``docs/api.md`` (code, status, meaning), and never renamed. ``ErrorCode`` is a ``StrEnum``: a member
is the string itself, so ``raise Conflict(..., code=ErrorCode.TURN_IN_PROGRESS)`` and
``code="turn_in_progress"`` raise the same thing. ``tests/achilles/unit/test_error_codes.py`` reads
every ``code=`` (and ``error_code=``) the product passes and every error class's own ``code``, and
fails on one that is not registered here or not in the table, and on a registered one nothing uses.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """The platform's error codes, grouped by the app that raises them."""

    # platform
    ERROR = "error"
    BAD_REQUEST = "bad_request"
    NOT_AUTHENTICATED = "not_authenticated"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    CONFLICT = "conflict"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    VALIDATION_ERROR = "validation_error"
    TOO_MANY_REQUESTS = "too_many_requests"
    INTERNAL_ERROR = "internal_error"
    SERVICE_UNAVAILABLE = "service_unavailable"
    DATABASE_UNAVAILABLE = "database_unavailable"
    CACHE_UNAVAILABLE = "cache_unavailable"
    BROKER_UNAVAILABLE = "broker_unavailable"
    BAD_CURSOR = "bad_cursor"
    UNKNOWN_MODEL = "unknown_model"
    WRONG_MODEL_KIND = "wrong_model_kind"
    NO_DEFAULT_MODEL = "no_default_model"
    UNKNOWN_PROVIDER = "unknown_provider"
    INVALID_EMAIL = "invalid_email"
    INVALID_TIMEZONE = "invalid_timezone"
    DIRECTORY_OWNED = "directory_owned"
    DIRECTORY_NOT_CONFIGURED = "directory_not_configured"
    DIRECTORY_SYNC_RUNNING = "directory_sync_running"
    DIRECTORY_UNAVAILABLE = "directory_unavailable"
    SCIM_CONFIG = "scim_config"
    SCIM_GROUP_NOT_MIRRORED = "scim_group_not_mirrored"
    SCIM_TOKEN_NOT_FOUND = "scim_token_not_found"
    SCIM_UNIQUENESS = "scim_uniqueness"
    SCIM_UNKNOWN_MEMBER = "scim_unknown_member"
    LLM_TIMEOUT = "llm_timeout"
    LLM_UNAVAILABLE = "llm_unavailable"
    LLM_BAD_RESPONSE = "llm_bad_response"

    # agents
    ADMIN_ONLY = "admin_only"
    AGENT_NOT_FOUND = "agent_not_found"
    AGENT_DISABLED = "agent_disabled"
    AGENT_PAUSED = "agent_paused"
    SUBSCRIPTION_NOT_FOUND = "subscription_not_found"
    ALREADY_RUNNING = "already_running"
    BUDGET_EXCEEDED = "budget_exceeded"
    MODEL_MISSING = "model_missing"
    MODEL_MISMATCH = "model_mismatch"
    NAME_EMPTY = "name_empty"
    NOT_EDITABLE = "not_editable"

    # conversations
    CONVERSATION_DELETED = "conversation_deleted"
    TURN_IN_PROGRESS = "turn_in_progress"
    FEEDBACK_ON_USER_MESSAGE = "feedback_on_user_message"
    MESSAGE_TOO_LONG = "message_too_long"
    WEB_SEARCH_UNAVAILABLE = "web_search_unavailable"

    # knowledge
    EMPTY_QUERY = "empty_query"
    QUERY_TOO_LONG = "query_too_long"
    INVALID_K = "invalid_k"
    INVALID_DEPTH = "invalid_depth"
    INVALID_RECORD_ID = "invalid_record_id"
    INVALID_IDENTITY = "invalid_identity"
    INVALID_RECORD = "invalid_record"
    INVALID_URL = "invalid_url"
    INVALID_LINK = "invalid_link"
    INVALID_ACCESS = "invalid_access"
    INVALID_ACCESS_KIND = "invalid_access_kind"
    INVALID_PRINCIPAL = "invalid_principal"
    UNKNOWN_PRINCIPAL = "unknown_principal"
    EMPTY_ACL = "empty_acl"
    ACL_NOT_ALLOWED = "acl_not_allowed"
    RECORD_NOT_FOUND = "record_not_found"
    DOCUMENT_NOT_FOUND = "document_not_found"
    USER_NOT_FOUND = "user_not_found"
    EMBEDDING_FAILED = "embedding_failed"
    EMPTY_DOCUMENT = "empty_document"
    NO_FILES = "no_files"
    TOO_MANY_FILES = "too_many_files"
    UPLOAD_REJECTED = "upload_rejected"
    INVALID_FILENAME = "invalid_filename"
    UNSUPPORTED_FORMAT = "unsupported_format"
    TOO_LARGE = "too_large"
    CORRUPT = "corrupt"
    ENCRYPTED = "encrypted"
    NEEDS_OCR = "needs_ocr"
    OCR_FAILED = "ocr_failed"
    TOO_SLOW = "too_slow"
    PARSE_UNFINISHED = "parse_unfinished"
    SQL_REJECTED = "sql_rejected"
    SQL_TIMEOUT = "sql_timeout"
    CONNECTOR_NOT_FOUND = "connector_not_found"
    RUN_NOT_FOUND = "run_not_found"
    CONNECTOR_NAME_TAKEN = "connector_name_taken"
    INVALID_KIND = "invalid_kind"
    INVALID_NAME = "invalid_name"
    INVALID_SCHEDULE = "invalid_schedule"
    INVALID_SPACE = "invalid_space"
    INVALID_TOKEN = "invalid_token"
    KIND_IMMUTABLE = "kind_immutable"
    MISSING_FIELD = "missing_field"

    # hub
    COMMAND_CLAIMED = "command_claimed"
    COMMAND_FINAL = "command_final"
    COMMAND_OPEN = "command_open"
    DEPENDENCY_NOT_CREATED = "dependency_not_created"
    NOTHING_TO_RETRY = "nothing_to_retry"
    LEASE_MISMATCH = "lease_mismatch"
    PUBLICATION_VERSION = "publication_version"
    SYNC_AGENT_EXISTS = "sync_agent_exists"
    SYNC_RUN_FINISHED = "sync_run_finished"
    PROJECT_NOT_READABLE = "project_not_readable"
    TOO_MANY_STREAMS = "too_many_streams"
