"""
The bodies of the management API (:mod:`stompbroker.web.api`): the JSON a
request carries in (a body, a query, a count) and the JSON it answers with (a
record, a message, what a browse, purge, move, retry or delete of a queue did).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import attrs
from twisted.web.server import Request

from stompbroker.broker.clients.hosted import client_copy
from stompbroker.broker.engine.shared_queues import Acted
from stompbroker.broker.features.browsing import Waiting
from stompbroker.broker.management.queue_operations import MAX_COUNT
from stompbroker.protocol.message import Message
from stompbroker.stats.schema import format_timestamp, to_timestamp
from stompbroker.web.api_guard import ApiError

__all__ = [
    "MAX_BODY",
    "NODE_HEADER",
    "Incomplete",
    "action_answer",
    "browse_answer",
    "count_of",
    "delete_answer",
    "json_body",
    "message_document",
    "query",
    "record_document",
    "record_documents",
]

#: Largest request body accepted, in bytes.
MAX_BODY = 1024 * 1024


def message_document(message: Message) -> dict[str, Any]:
    """
    :returns: a message as JSON: its headers as an object (the first of a
        repeated header wins, as in STOMP), its body as text when it is UTF-8,
        else base64 (``body_encoding`` says which).
    """
    try:
        body, encoding = message.body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        body, encoding = base64.b64encode(message.body).decode("ascii"), "base64"
    headers: dict[str, str] = {}
    for name, value in message.headers:
        headers.setdefault(name, value)
    return {
        "message_id": message.message_id,
        "destination": message.destination,
        "headers": headers,
        "body": body,
        "body_encoding": encoding,
        "size": len(message.body),
        "persistent": message.persistent,
        "redeliveries": message.redeliveries,
    }


def query(request: Request, name: str) -> str | None:
    values = (request.args or {}).get(name.encode("ascii"))
    return values[0].decode("utf-8", "replace") if values else None


def count_of(value: Any, default: int, limit: int = MAX_COUNT) -> int:
    """:raises ApiError: for a count that is not a whole number from 1 to ``limit``."""
    if value is None:
        return default
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise ApiError(400, "bad request", f"count must be a whole number from 1 to {limit}")
    return value


def json_body(request: Request, known: set[str], limit: int = MAX_BODY) -> dict[str, Any]:
    """
    :param limit: the most bytes the body may have.
    :returns: the request's JSON object.
    :raises ApiError: 413 for a body over ``limit``, 400 for one that is
        not a JSON object or has a key not in ``known``.
    """
    content = request.content.read(limit + 1) if request.content is not None else b""
    if len(content) > limit:
        raise ApiError(413, "body too large", f"this call takes at most {limit} bytes")
    try:
        document = json.loads(content or b"{}")
    except ValueError as error:
        raise ApiError(400, "bad request", f"the body is not JSON: {error}") from None
    if not isinstance(document, dict):
        raise ApiError(400, "bad request", "the body must be a JSON object")
    unknown = sorted(set(document) - known)
    if unknown:
        raise ApiError(
            400, "bad request", f"unknown field {unknown[0]!r}; expected {', '.join(sorted(known))}"
        )
    return document


#: The response header of a browse that names the node that answered.
NODE_HEADER = b"stompbroker-node"


def record_documents(records: Any) -> list[Any]:
    """:returns: each record as JSON."""
    return [record_document(record) for record in records]


def record_document(value: Any) -> Any:
    """:returns: an attrs record as JSON, times in ISO-8601."""
    document = attrs.asdict(value)
    for name in _TIMES:
        if name in document:
            document[name] = format_timestamp(to_timestamp(document[name]))
    return document


#: The fields of records that are times, in clock seconds.
_TIMES = ("connected_since", "detached_since", "expires_at", "since")


def browse_answer(waiting: Waiting, request: Request) -> list[dict[str, Any]]:
    """
    A browse's answer: the messages, the node that answered in a header; a 503
    when a node holding messages of the queue did not answer (a list that
    misses some would read as the whole).
    """
    request.setHeader(NODE_HEADER, waiting.node.encode("utf-8"))
    if not waiting.complete:
        raise Incomplete(waiting.node, waiting.missing)
    return [message_document(client_copy(message)) for message in waiting.messages]


def action_answer(acted: Acted, document: dict[str, Any], field: str) -> dict[str, Any]:
    """:returns: a purge's, move's or retry's answer: its count, and who answered."""
    document[field] = acted.count
    if field == "retried":
        document["left"] = acted.left
    document["node"] = acted.node
    document["complete"] = acted.complete
    if not acted.complete:
        document["missing"] = list(acted.missing)
    return document


def delete_answer(discarded: int | Acted, document: dict[str, Any]) -> dict[str, Any]:
    """
    A delete's answer; for a queue several nodes share, also who answered, and
    ``deleted`` false when a node holding its messages did not answer.
    """
    if isinstance(discarded, int):
        return {**document, "deleted": True, "discarded": discarded}
    document = action_answer(discarded, document, "discarded")
    document["deleted"] = discarded.complete
    return document


class Incomplete(ApiError):
    """A browse some node holding messages of the queue did not answer: 503."""

    def __init__(self, node: str, missing: tuple[str, ...]) -> None:
        super().__init__(
            503,
            "cluster incomplete",
            f"nodes {', '.join(missing)} hold messages of this queue and did not answer"
            " in time; try again",
        )
        self.node = node
        self.missing = missing

    def document(self) -> dict[str, Any]:
        """:returns: the JSON body, with the node that answered and those that did not."""
        return {**super().document(), "node": self.node, "missing": list(self.missing)}


def publish_fields(document: dict[str, Any]) -> tuple[bytes, tuple[tuple[str, str], ...]]:
    """
    Read what a publish gives (``body``, ``body_encoding``, ``headers``), in one
    call or in each message of a batch.

    :returns: the body's bytes and the headers.
    :raises ApiError: 400 naming what is wrong.
    """
    headers = document.get("headers", {})
    if not isinstance(headers, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in headers.items()
    ):
        raise ApiError(400, "bad request", '"headers" must be an object of strings')
    for key in headers:
        if not key or any(character in key for character in ":\r\n"):
            raise ApiError(400, "bad request", f"invalid header name {key!r}")
    text = document.get("body", "")
    encoding = document.get("body_encoding", "utf-8")
    if not isinstance(text, str) or encoding not in ("utf-8", "base64"):
        raise ApiError(
            400, "bad request", '"body" must be a string, "body_encoding" utf-8 or base64'
        )
    try:
        if encoding == "base64":
            payload = base64.b64decode(text, validate=True)
        else:
            payload = text.encode("utf-8")
    except binascii.Error:
        raise ApiError(400, "bad request", '"body" is not valid base64') from None
    return payload, tuple(headers.items())
