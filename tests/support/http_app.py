"""
A stand-in for the application behind ``--auth http:URL``, without sockets: a
client with treq's ``post`` whose answers the test gives, at once or later.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from attrs import define, field
from twisted.internet.defer import Deferred, succeed

URL = "http://app.test/stomp"

#: (path, request body) -> (HTTP status, answer document), or None to answer later.
Decide = Callable[[str, dict[str, Any]], "tuple[int, Any] | None"]


@define
class Response:
    """What treq's response offers the endpoint: a status and the body."""

    code: int
    body: bytes

    def content(self) -> Deferred[bytes]:
        return succeed(self.body)


@define
class Request:
    """One request the broker made, and its Deferred if it is still unanswered."""

    path: str
    body: dict[str, Any]
    answer: Deferred[Response] = field(factory=Deferred)

    def reply(self, document: Any, code: int = 200) -> None:
        """Answer it now."""
        text = document if isinstance(document, bytes) else json.dumps(document).encode()
        self.answer.callback(Response(code, text))


@define
class AppClient:
    """
    Records what the broker asks, and answers with ``decide``'s answer, or not
    yet when it gives ``None`` (the test then calls :meth:`Request.reply`).
    """

    decide: Decide
    requests: list[Request] = field(factory=list)

    def post(self, url: str, json: dict[str, Any]) -> Deferred[Response]:
        assert url.startswith(URL + "/"), url
        request = Request(url[len(URL) + 1 :], json)
        self.requests.append(request)
        decided = self.decide(request.path, json)
        if decided is not None:
            request.reply(decided[1], decided[0])
        return request.answer

    def paths(self) -> list[str]:
        return [request.path for request in self.requests]


def rules(
    users: dict[str, str],
    allowed: set[tuple[str, str, str]],
    vhosts: set[tuple[str, str]] | None = None,
) -> Decide:
    """
    :param users: login -> passcode of the users who may connect.
    :param allowed: (user, action, destination) the application allows.
    :param vhosts: (user, virtual host) the application allows; ``None``: every one.
    :returns: a ``decide`` that answers as a simple application would.
    """

    def decide(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path == "user":
            if users.get(body["login"]) == body["passcode"]:
                return 200, {"allow": True}
            return 200, {"allow": False, "reason": "unknown user or wrong passcode"}
        if path == "vhost":
            return 200, {"allow": vhosts is None or (body["user"], body["vhost"]) in vhosts}
        key = (body["user"], body["action"], body["destination"])
        return 200, {"allow": key in allowed}

    return decide
