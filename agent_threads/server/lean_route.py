"""`LeanRoute`: a FastAPI route whose requests skip FastAPI's generic request handling.

FastAPI's handler is written for every kind of endpoint: it parses the content type with
`email.message`, decodes the JSON body and then validates it, solves the endpoint's and
each dependency's parameters by looking at every kind (path, query, header, cookie,
body), validates the answer again, and opens a span per step when tracing is on. On an
append (`POST /api/threads/{id}/messages`) over SQLite that was ~100-130 us of the
~600 us the app spent on it (measured). A `LeanRoute` is documented as any route (its
endpoint's signature makes its OpenAPI operation, as FastAPI reads it), but answers a
request in a few steps: the JSON body validated from its bytes at once, each dependency
called with the request, the endpoint called, its answer serialized. `@lean_post(router,
path, ...)` declares one, as `@router.post(path, ...)` declares an `APIRoute`: the
service's appends and forks are lean.

It fits an endpoint whose parameters are path parameters (strings), at most one JSON
body (a pydantic model, not embedded), dependencies that take the `Request` alone, and
the `Request`; one that needs more is refused when the route is made, never served
differently. Errors are raised as FastAPI's handler raises them (`RequestValidationError`
with `body` first in each error's `loc`, `HTTPException` 400 for a body that could not
be read), so the app's error handlers answer them alike. With OpenTelemetry on, FastAPI's
span of the request stays; its spans of each step (dependencies, endpoint, serialization)
are not made for a lean route.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.params import Body
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.convertors import StringConvertor
from starlette.requests import ClientDisconnect

Endpoint = Callable[..., Awaitable[Any]]
Dependency = Callable[[Request], Awaitable[Any]]

_MISSING_BODY = {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
_NOT_JSON = {
    "type": "model_attributes_type",
    "loc": ("body",),
    "msg": "a JSON body is needed (Content-Type: application/json)",
    "input": None,
}


def _is_json(content_type: str | None) -> bool:
    """Whether a `Content-Type` names JSON (`application/json`, `application/*+json`)."""
    if not content_type:
        return False
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a lean route does with a request, worked out once from its endpoint."""

    endpoint: Endpoint
    dependencies: tuple[tuple[str, Dependency], ...]
    body_name: str | None
    body: TypeAdapter[Any] | None
    request_name: str | None
    answer: TypeAdapter[Any]
    status: int

    async def values(self, request: Request) -> dict[str, Any]:
        """The endpoint's arguments for `request`.

        Raises:
            RequestValidationError: the body is missing, not JSON, or not valid.
            HTTPException: the body could not be read (400, as FastAPI answers it).
        """
        values: dict[str, Any] = dict(request.path_params)
        for name, dependency in self.dependencies:
            values[name] = await dependency(request)
        if self.body is not None and self.body_name is not None:
            values[self.body_name] = _validated(self.body, await _json_body(request))
        if self.request_name is not None:
            values[self.request_name] = request
        return values

    async def answer_to(self, request: Request) -> Response:
        """The endpoint's answer to `request`, serialized as FastAPI does (by alias)."""
        result = await self.endpoint(**await self.values(request))
        content = self.answer.dump_json(
            self.answer.validate_python(result, from_attributes=True), by_alias=True
        )
        return Response(content, status_code=self.status, media_type="application/json")


def _validated(model: TypeAdapter[Any], body: bytes) -> Any:
    """The body, validated from its JSON bytes.

    Raises:
        RequestValidationError: it is not valid, `body` first in each error's `loc`.
    """
    try:
        return model.validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if errors[0]["type"] == "json_invalid":
            raise RequestValidationError([_undecodable(body, errors[0])]) from None
        raise RequestValidationError(
            [{**error, "loc": ("body", *error["loc"])} for error in errors]
        ) from None


def _undecodable(body: bytes, error: Any) -> dict[str, Any]:
    """A body that is not JSON, at the character where it stops being JSON, as FastAPI says."""
    try:
        json.loads(body)
    except json.JSONDecodeError as exc:
        return {**error, "loc": ("body", exc.pos)}
    except ValueError:  # not UTF-8 text: FastAPI names the body alone
        pass
    return {**error, "loc": ("body",)}


async def _json_body(request: Request) -> bytes:
    """The request's body, if it is JSON.

    Raises:
        RequestValidationError: there is no body, or its content type is not JSON.
        HTTPException: the body could not be read (400).
    """
    if not _is_json(request.headers.get("content-type")):
        raise RequestValidationError([_NOT_JSON])
    try:
        body = await request.body()
    except ClientDisconnect as exc:  # as FastAPI: a body that could not be read is a 400
        raise HTTPException(400, "There was an error parsing the body") from exc
    if not body:
        raise RequestValidationError([_MISSING_BODY])
    return body


def _refuse(route: APIRoute, reason: str) -> TypeError:
    return TypeError(f"LeanRoute {route.path}: {reason}; use an APIRoute")


def _dependency(route: APIRoute, sub: Dependant) -> tuple[str, Dependency]:
    """A dependency that takes the request alone, as (parameter name, call)."""
    own = (sub.path_params, sub.query_params, sub.header_params, sub.cookie_params)
    takes_request_only = sub.request_param_name is not None and not any(own)
    if (
        sub.name is None
        or sub.call is None
        or not inspect.iscoroutinefunction(sub.call)
        or sub.dependencies
        or sub.body_params
        or not takes_request_only
    ):
        raise _refuse(route, f"dependency {sub.name} must be `async def f(request: Request)`")
    return sub.name, sub.call


def _body(route: APIRoute) -> tuple[str, TypeAdapter[Any]] | tuple[None, None]:
    """The JSON body parameter's name and its model's adapter (none: no body)."""
    params = route.dependant.body_params
    if not params:
        return None, None
    field = params[0]
    model = field.field_info.annotation
    if (
        len(params) > 1
        or not isinstance(field.field_info, Body)
        or field.field_info.embed
        or not field.field_info.is_required()
        or not (isinstance(model, type) and issubclass(model, BaseModel))
    ):
        raise _refuse(route, "the body must be one required pydantic model, not embedded")
    return field.name, TypeAdapter(model)


def _plan(route: APIRoute) -> _Plan:
    """The plan of a lean route.

    Raises:
        TypeError: the endpoint needs what a lean route does not do.
    """
    dependant = route.dependant
    if dependant.query_params or dependant.header_params or dependant.cookie_params:
        raise _refuse(route, "query, header and cookie parameters are not read")
    if not all(isinstance(c, StringConvertor) for c in route.param_convertors.values()) or any(
        p.field_info.annotation is not str or p.field_info.metadata for p in dependant.path_params
    ):
        raise _refuse(route, "path parameters must be plain strings")
    if (
        dependant.response_param_name
        or dependant.background_tasks_param_name
        or dependant.websocket_param_name
        or dependant.security_scopes_param_name
        or route.response_model is None
        or route.status_code is None
        or not inspect.iscoroutinefunction(route.endpoint)
    ):
        raise _refuse(route, "the endpoint must be async, return its model and set a status")
    body_name, body = _body(route)
    return _Plan(
        endpoint=route.endpoint,
        dependencies=tuple(_dependency(route, sub) for sub in dependant.dependencies),
        body_name=body_name,
        body=body,
        request_name=dependant.request_param_name,
        answer=TypeAdapter(route.response_model),
        status=route.status_code,
    )


E = TypeVar("E", bound=Endpoint)


class LeanRoute(APIRoute):
    """An `APIRoute` answered by its `_Plan` instead of FastAPI's generic handler.

    Include its router without router-level dependencies: they are not run here (the
    plan is made from the route's own endpoint).
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        return _plan(self).answer_to


def lean_post(router: APIRouter, path: str, **options: Any) -> Callable[[E], E]:
    """`@router.post(path, **options)`, the route a `LeanRoute`."""

    def add(endpoint: E) -> E:
        router.add_api_route(
            path, endpoint, methods=["POST"], route_class_override=LeanRoute, **options
        )
        return endpoint

    return add


__all__ = ["LeanRoute", "lean_post"]
