"""
The calls of the management API that an application's backend makes, as
Centrifugo's server API and Pusher's trigger API give them: publish many
messages in one call, and act on a user wherever its sessions are on this node.

=====================================================  ======  =================================
path                                                   method  what
=====================================================  ======  =================================
``/api/publish``                                       POST    ``{"messages": [...]}``: a batch
``/api/users/{login}/sessions``                        GET     its connections, detached sessions
``/api/users/{login}/sessions?reason=...``             DELETE  close them all, end the detached
``/api/users/{login}/unsubscribe``                     POST    ``{"destination", "reason"}``
=====================================================  ======  =================================

Rights, checked as for every call (:mod:`stompbroker.web.api_guard`): each
message of a batch needs ``write`` on its destination (the application behind
``--auth http:`` is asked as for a SEND); a user's sessions are read with
``read`` on ``/user/{login}/#`` and closed with ``admin`` there; ending a user's
subscriptions to a destination needs ``admin`` on that destination.  A batch
is checked whole before anything is published: a refused message refuses the
call, and nothing is sent.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, FirstError, gatherResults
from twisted.python.failure import Failure
from twisted.web.server import Request

from stompbroker.broker.management.operations import Management
from stompbroker.broker.management.queue_operations import check_publish_target
from stompbroker.broker.routing.virtual_hosts import DEFAULT_HOST
from stompbroker.web.api_bodies import json_body, publish_fields, query, record_document
from stompbroker.web.api_guard import ADMIN, READ, WRITE, ApiError, ApiGuard
from stompbroker.web.api_hosts import ApiHosts

__all__ = ["MAX_BATCH", "MAX_BATCH_BODY", "BackendCalls"]

#: The most messages one batch may hold.
MAX_BATCH = 1000
#: The most bytes a batch's body may have.
MAX_BATCH_BODY = 16 * 1024 * 1024


class BackendCalls:
    """
    The backend's calls (see the module notes).

    :param management: the broker's operations.
    :param guard: who may call what.
    :param hosts: the virtual hosts, to name destinations inward.
    """

    def __init__(self, management: Management, guard: ApiGuard, hosts: ApiHosts) -> None:
        self._management = management
        self._guard = guard
        self._hosts = hosts

    def publish_batch(self, identity: Any, request: Request, operator: str) -> Deferred[Any]:
        """
        ``POST /api/publish``: every message checked, then every one published
        in the order given.

        :returns: a Deferred of ``{"published": N, "messages": [{destination,
            vhost, message_id}, ...]}``.
        """
        body = json_body(request, {"messages"}, MAX_BATCH_BODY)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "bad request", '"messages" must be a list of messages')
        if len(messages) > MAX_BATCH:
            raise ApiError(
                400,
                "bad request",
                f"a batch holds at most {MAX_BATCH} messages, not {len(messages)}",
            )
        batch = []
        for number, document in enumerate(messages):
            try:
                batch.append(self._one(document))
            except ApiError as error:
                raise ApiError(
                    error.code, error.error, f"message {number}: {error.detail}"
                ) from None
        asked = [
            self._guard.ask(
                identity, WRITE, name, self._hosts.access(vhost), self._hosts.refused_in(vhost)
            )
            for name, vhost, _, _, _ in batch
        ]
        allowed: Deferred[Any] = gatherResults(asked, consumeErrors=True)
        allowed.addErrback(_first_refusal)
        return allowed.addCallback(self._publish_all, batch)

    def _one(self, document: Any) -> tuple[str, str, str, bytes, tuple[tuple[str, str], ...]]:
        if not isinstance(document, dict):
            raise ApiError(400, "bad request", "each message must be a JSON object")
        unknown = sorted(
            set(document) - {"destination", "vhost", "body", "body_encoding", "headers"}
        )
        if unknown:
            raise ApiError(400, "bad request", f"unknown field {unknown[0]!r}")
        name = document.get("destination")
        if not isinstance(name, str):
            raise ApiError(400, "bad request", '"destination" must be a string')
        try:
            check_publish_target(name)
        except ValueError as error:
            raise ApiError(400, "bad request", str(error)) from None
        host = self._hosts.named(document.get("vhost"))
        vhost = host.name if host is not None else DEFAULT_HOST
        payload, headers = publish_fields(document)
        return name, vhost, self._hosts.inward(host, name), payload, headers

    def _publish_all(self, _: Any, batch: list[Any]) -> dict[str, Any]:
        published = []
        for name, vhost, internal, payload, headers in batch:
            message = self._management.publish(internal, payload, headers)
            published.append(
                {"destination": name, "vhost": vhost, "message_id": message.message_id}
            )
        return {"published": len(published), "messages": published}

    def user(
        self, identity: Any, request: Request, method: str, login: str, action: str, operator: str
    ) -> Any:
        """``/api/users/{login}/{action}``: a user's sessions, or ending its subscriptions."""
        mine = f"/user/{login}/#"
        if action == "sessions":
            if method not in ("GET", "DELETE"):
                raise ApiError(405, "method not allowed", "this path takes DELETE, GET")
            self._guard.require(identity, READ if method == "GET" else ADMIN, mine)
            if method == "GET":
                return _sessions_document(self._management.user_sessions(login))
            reason = query(request, "reason") or ""
            closed = self._management.disconnect_user(login, reason, operator=operator)
            return _sessions_document(closed)
        if action == "unsubscribe":
            if method != "POST":
                raise ApiError(405, "method not allowed", "this path takes POST")
            body = json_body(request, {"destination", "reason"})
            destination = body.get("destination")
            reason = body.get("reason", "")
            if not isinstance(destination, str) or not isinstance(reason, str):
                raise ApiError(400, "bad request", '"destination" and "reason" must be strings')
            self._guard.require(identity, ADMIN, destination)
            ended = self._management.unsubscribe_user(login, destination, reason, operator=operator)
            return {"login": login, "destination": destination, "unsubscribed": ended}
        raise ApiError(404, "no such call", f"users have no /{action}")


def _first_refusal(failure: Failure) -> Failure:
    """:returns: the first refusal of a batch's messages (``gatherResults`` wraps it)."""
    error = failure.value
    if isinstance(error, FirstError):
        first: Failure = error.subFailure
        return first
    return failure


def _sessions_document(sessions: Any) -> dict[str, Any]:
    return {
        "login": sessions.login,
        "connections": [record_document(info) for info in sessions.connections],
        "detached": [record_document(info) for info in sessions.detached],
    }
