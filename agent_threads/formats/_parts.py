"""Pieces both provider formats share: result text, summary text, data URLs, input checks."""

from __future__ import annotations

import json
import mimetypes
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, JsonValue

from agent_threads.errors import InvalidValueError
from agent_threads.messages import SummaryPart

SUMMARY_HEADING = "Summary of earlier messages:"
"""How a summary part reads to a model (providers have no summary type)."""

_DATA_URL = re.compile(r"^data:(?P<media_type>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)$", re.S)


def result_text(result: JsonValue) -> str:
    """A tool result as the text a provider takes: strings as they are, other JSON encoded."""
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False)


def summary_text(part: SummaryPart) -> str:
    return f"{SUMMARY_HEADING}\n{part.text}"


def data_url(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


def parse_data_url(url: str) -> tuple[str, str] | None:
    """`(media_type, base64 data)` of a `data:` URL, or None if it is not one."""
    match = _DATA_URL.match(url)
    return None if match is None else (match["media_type"], match["data"])


def field(block: Mapping[str, Any], name: str, kind: type, where: str) -> Any:
    """`block[name]`, checked to be a `kind`; ValueError naming `where` otherwise."""
    value = block.get(name)
    if not isinstance(value, kind):
        raise InvalidValueError(where, reason=f"{name!r} must be a {kind.__name__}, got {value!r}")
    return value


def as_mapping(value: object, where: str) -> Mapping[str, Any]:
    """`value` as a mapping; an SDK's pydantic object (a client's reply) is dumped first."""
    if isinstance(value, BaseModel):  # e.g. openai's ChatCompletionMessage
        return value.model_dump(exclude_none=True)
    if not isinstance(value, Mapping):
        raise InvalidValueError(where, reason=f"expected an object (dict), got {value!r}")
    return value


def guess_image_type(url: str) -> str:
    """The image media type a URL's extension suggests, or "image/*" when it says nothing."""
    guessed = mimetypes.guess_type(url.split("?", 1)[0])[0]
    return guessed if guessed and guessed.startswith("image/") else "image/*"
