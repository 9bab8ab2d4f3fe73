"""The bodies of the OpenAI-compatible `/v1` API, in the shapes the `openai` client reads."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StringConstraints

from agent_threads.server.api.models import PageLimit
from agent_threads.threads.chat import ChatMessageThread

_REQUEST = ConfigDict(frozen=True, extra="forbid")
_ANSWER = ConfigDict(frozen=True)

MAX_ITEMS = 20
"""The most items one create call takes (as OpenAI's API)."""

MetadataKey = Annotated[str, StringConstraints(max_length=64)]
MetadataValue = Annotated[str, StringConstraints(max_length=512)]
Metadata = Annotated[
    dict[MetadataKey, MetadataValue],
    Field(max_length=16, description="Up to 16 pairs: keys of at most 64 characters, values 512"),
]
Items = Annotated[
    list[dict[str, JsonValue]],
    Field(max_length=MAX_ITEMS, description="Responses API input items, at most 20"),
]

__all__ = [
    "MAX_ITEMS",
    "Conversation",
    "ConversationCreate",
    "ConversationDeleted",
    "ConversationUpdate",
    "ItemList",
    "ItemsCreate",
    "Metadata",
    "PageLimit",
]


class ConversationCreate(BaseModel):
    """A new conversation: its first items and its metadata, both optional."""

    model_config = _REQUEST
    items: Items | None = None
    metadata: Metadata | None = None


class ConversationUpdate(BaseModel):
    """The conversation's new metadata (replacing the old; null clears it)."""

    model_config = _REQUEST
    metadata: Metadata | None


class ItemsCreate(BaseModel):
    """Items to add at the end of a conversation, in order, all or nothing."""

    model_config = _REQUEST
    items: Items


class Conversation(BaseModel):
    """A conversation: a chat thread, its metadata, its creation time in epoch seconds."""

    model_config = _ANSWER
    id: str
    object: Literal["conversation"] = "conversation"
    created_at: int
    metadata: dict[str, JsonValue]

    @classmethod
    def of(cls, thread: ChatMessageThread) -> Conversation:
        """The conversation a thread is (read from the handle: no store access)."""
        return cls(
            id=thread.id,
            created_at=int(thread.created_at.timestamp()),
            metadata=dict(thread.metadata),
        )


class ConversationDeleted(BaseModel):
    """The answer to a conversation's deletion."""

    model_config = _ANSWER
    id: str
    object: Literal["conversation.deleted"] = "conversation.deleted"
    deleted: bool = True


class ItemList(BaseModel):
    """A list of items (a page, or the items just added); ids null when it is empty."""

    model_config = _ANSWER
    object: Literal["list"] = "list"
    data: list[dict[str, Any]]
    first_id: str | None
    last_id: str | None
    has_more: bool

    @classmethod
    def of(cls, items: list[dict[str, Any]], *, has_more: bool = False) -> ItemList:
        """The list of these items."""
        return cls(
            data=items,
            first_id=items[0]["id"] if items else None,
            last_id=items[-1]["id"] if items else None,
            has_more=has_more,
        )
