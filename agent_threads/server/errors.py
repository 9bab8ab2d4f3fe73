"""Errors as HTTP answers: one handler per library error class, one body shape for all.

Every error answer has the body `{"error": {"message", "type", "param", "code"}}` (the
OpenAI API's envelope, so one client reads the native API and `/v1` alike): `message`
names what is wrong, `param` the field or id at fault. Handlers are installed once on
the app (`install_error_handlers`); no route catches a library error itself. No answer
carries a stack trace: an unexpected error is logged and answered 500 with a plain
message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException

from agent_threads.errors import (
    AgentThreadsError,
    CheckpointNotFoundError,
    ConflictError,
    ContextOverflowError,
    DuplicateMessageError,
    InvalidIdError,
    InvalidValueError,
    MessageNotFoundError,
    RunInProgressError,
    SchemaVersionError,
    StoreUnavailableError,
    SubThreadNotFoundError,
    ThreadNotFoundError,
    UnansweredToolCallError,
)

log = logging.getLogger("agent_threads.server")


class ErrorDetail(BaseModel):
    """What went wrong: a message naming it, its type, the field or id at fault."""

    model_config = ConfigDict(frozen=True)
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorBody(BaseModel):
    """The body of every error answer."""

    model_config = ConfigDict(frozen=True)
    error: ErrorDetail


class RequestTooLargeError(Exception):
    """A request body is larger than the service takes (answered 413)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"the request body is larger than {limit} bytes, the most this service takes"
        )


class UnauthorizedError(Exception):
    """A request without a valid API key (answered 401)."""


_DESCRIPTIONS = {
    400: "A field is malformed; `param` names it (as the OpenAI API answers it)",
    401: "No valid API key (`Authorization: Bearer KEY`)",
    404: "No such thread, message, checkpoint or run (for this tenant)",
    409: "The id is taken, or another writer or runner holds the thread",
    413: "The request body is too large",
    422: "A field is malformed; `param` names it",
    503: "The store cannot be reached; retry later",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` of a route that may answer these error statuses."""
    json = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    return {
        s: {"model": ErrorBody, "description": _DESCRIPTIONS[s], "content": json} for s in statuses
    }


def error_response(
    status: int,
    message: str,
    kind: str,
    *,
    param: str | None = None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """An error answer with the common body."""
    body = ErrorBody(error=ErrorDetail(message=message, type=kind, param=param, code=code))
    return JSONResponse(
        body.model_dump(), status_code=status, headers=None if headers is None else dict(headers)
    )


Handler = Callable[[Request, Exception], Awaitable[JSONResponse]]


OPENAI_PREFIX = "/v1/"
"""Where the OpenAI-compatible API lives: a malformed request is answered as OpenAI does."""


def _malformed(request: Request) -> tuple[int, str]:
    """The status and type of a malformed request's answer.

    422 `invalid_request` on the native API; 400 `invalid_request_error` under `/v1`, as
    OpenAI answers (the `openai` client raises `BadRequestError` for it).
    """
    if request.url.path.startswith(OPENAI_PREFIX):
        return 400, "invalid_request_error"
    return 422, "invalid_request"


def _answer(status: int, kind: str, param: Callable[[Any], str | None]) -> Handler:
    async def handle(request: Request, exc: Exception) -> JSONResponse:
        answered, named = _malformed(request) if status == 422 else (status, kind)
        return error_response(answered, str(exc), named, param=param(exc))

    return handle


def _none(exc: object) -> None:
    return None


async def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = exc.errors()
    first = problems[0] if problems else {"loc": (), "msg": "invalid request"}
    where = ".".join(str(p) for p in first.get("loc", ()))
    message = "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}" for e in problems[:5]
    )
    status, kind = _malformed(request)
    return error_response(status, message or "invalid request", kind, param=where or None)


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 400:  # FastAPI's "error parsing the body": malformed, like any 422
        status, kind = _malformed(request)
        return error_response(status, f"body: {exc.detail}", kind, param="body")
    kind = "not_found" if exc.status_code == 404 else "http_error"
    return error_response(exc.status_code, str(exc.detail), kind, headers=exc.headers)


async def _unavailable(request: Request, exc: Exception) -> JSONResponse:
    return error_response(503, str(exc), "store_unavailable", headers={"Retry-After": "1"})


async def _unauthorized(request: Request, exc: Exception) -> JSONResponse:
    return error_response(
        401, str(exc), "unauthorized", headers={"WWW-Authenticate": 'Bearer realm="agent-threads"'}
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal error: the service logged it", "internal_error")


_HANDLERS: list[tuple[type[Exception], Handler]] = [
    (ThreadNotFoundError, _answer(404, "not_found", lambda e: e.thread_id)),
    (MessageNotFoundError, _answer(404, "not_found", lambda e: e.message_id)),
    (CheckpointNotFoundError, _answer(404, "not_found", lambda e: e.checkpoint)),
    (SubThreadNotFoundError, _answer(404, "not_found", lambda e: e.key)),
    (ConflictError, _answer(409, "conflict", lambda e: e.key)),
    (RunInProgressError, _answer(409, "conflict", lambda e: e.workflow_id)),
    (InvalidIdError, _answer(422, "invalid_request", lambda e: e.what)),
    (InvalidValueError, _answer(422, "invalid_request", lambda e: e.where)),
    (DuplicateMessageError, _answer(409, "conflict", lambda e: e.message_id)),
    (UnansweredToolCallError, _answer(422, "invalid_request", lambda e: e.call_id)),
    (ContextOverflowError, _answer(422, "invalid_request", _none)),
    (SchemaVersionError, _answer(422, "invalid_request", lambda e: e.where)),
    (RequestTooLargeError, _answer(413, "request_too_large", _none)),
    (UnauthorizedError, _unauthorized),
    (StoreUnavailableError, _unavailable),
    (AgentThreadsError, _answer(500, "store_error", _none)),
    (RequestValidationError, _validation),
    (HTTPException, _http),
    (Exception, _unexpected),
]


def install_error_handlers(app: FastAPI) -> None:
    """Answer every library error (and any other) with the common error body."""
    for error, handler in _HANDLERS:
        app.add_exception_handler(error, handler)


__all__ = [
    "ErrorBody",
    "ErrorDetail",
    "RequestTooLargeError",
    "UnauthorizedError",
    "error_response",
    "error_responses",
    "install_error_handlers",
]
