"""
The bodies of the management API (:mod:`stompbroker.web.api`): the JSON a
request carries in (a body, a query, a count) and the JSON of a message out.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from twisted.web.server import Request

from stompbroker.broker.management.queue_operations import MAX_COUNT
from stompbroker.protocol.message import Message
from stompbroker.web.api_guard import ApiError

__all__ = ["MAX_BODY", "count_of", "json_body", "message_document", "query"]

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


def count_of(value: Any, default: int) -> int:
    """:raises ApiError: for a count that is not a whole number from 1 to MAX_COUNT."""
    if value is None:
        return default
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise ApiError(400, "bad request", f"count must be a whole number from 1 to {MAX_COUNT}")
    return value


def json_body(request: Request, known: set[str]) -> dict[str, Any]:
    """
    :returns: the request's JSON object.
    :raises ApiError: 413 for a body over :data:`MAX_BODY`, 400 for one that is
        not a JSON object or has a key not in ``known``.
    """
    content = request.content.read(MAX_BODY + 1) if request.content is not None else b""
    if len(content) > MAX_BODY:
        raise ApiError(413, "body too large", f"the API takes at most {MAX_BODY} bytes")
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
