"""
The management API without sockets, for the tests of :mod:`stompbroker.web.api`:
a broker with a queue of three messages behind ``StubTreq`` (:class:`Api`),
credentials, and :func:`refused`, which checks that a refused call changed nothing.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from treq.testing import StubTreq
from twisted.cred import strcred
from twisted.internet.task import Clock

from stompbroker.broker.management.operations import Management
from stompbroker.broker.service import Broker
from stompbroker.security.access_file import AccessControl, parse_policy
from stompbroker.security.origins import AllowedOrigins
from stompbroker.security.portal import make_portal
from stompbroker.security.tokens import make_checker
from stompbroker.stats.model import StatsModel
from stompbroker.stats.sampling_services import LiveStats
from stompbroker.web.api import ManagementApi
from stompbroker.web.api_guard import ApiGuard
from stompbroker.web.site import web_root
from tests.support.tokens import AUDIENCE, NOW

ORDERS = "%2Fqueue%2Forders"
POLICY = """
[users.reader]
read = ["#"]
[users.admin]
read = ["#"]
write = ["#"]
admin = ["#"]
[users.orders]
read = ["/queue/orders"]
admin = ["/queue/orders"]
"""


def basic(user: str, password: str = "secret") -> dict[str, str]:
    """:returns: an Authorization header with HTTP Basic credentials."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


class Api:
    """A broker with a queue of three messages, its API behind StubTreq, and a clock to advance."""

    def __init__(
        self,
        auth: bool = False,
        token_secret: Path | None = None,
        allowed_origins: tuple[str, ...] = (),
        live_interval: float | None = None,
    ) -> None:
        self.clock = Clock()
        if token_secret is not None:
            self.clock.advance(NOW)
        self.broker = Broker(self.clock)
        for body in ("one", "two", "three"):
            self.broker.publish("/queue/orders", body)
        portal = access = None
        if auth:
            users = ":".join(f"{user}:secret" for user in ("reader", "admin", "orders"))
            checkers = [strcred.makeChecker(f"memory:{users}")]
            if token_secret is not None:
                argstring = f"secret={token_secret}:audience={AUDIENCE}"
                checkers.append(make_checker(argstring, clock=self.clock))
            portal = make_portal(checkers)
            access = AccessControl()
            access.policy = parse_policy(POLICY)
        guard = ApiGuard(
            portal, access, self.clock, allowed_origins=AllowedOrigins(allowed_origins)
        )
        #: With ``live_interval``: the live statistics, not started (call ``tick`` yourself).
        self.live = (
            None if live_interval is None else LiveStats(StatsModel(self.broker), live_interval)
        )
        api = ManagementApi(Management(self.broker), guard, live=self.live)
        self.treq = StubTreq(web_root(self.broker, api=api))

    def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, Any]:
        """:returns: the status, the JSON answer and the response of one call."""
        code, content, response = call_api(self.treq, self.clock, method, path, body, headers)
        return code, json.loads(content), response

    def depth(self) -> int:
        return len(self.broker.engine.queues["/queue/orders"].pending)


def call_api(
    treq: StubTreq,
    clock: Clock,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes, Any]:
    """:returns: the status, the body and the response of one call of ``/api/{path}``."""
    headers = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    responses: list[Any] = []
    treq.request(method, f"http://localhost/api/{path}", data=data, headers=headers).addCallback(
        responses.append
    )
    treq.flush()
    clock.advance(2)
    treq.flush()
    [response] = responses
    content: list[bytes] = []
    treq.content(response).addCallback(content.append)
    treq.flush()
    return response.code, content[0], response


def refused(
    api: Api,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str]]:
    """:returns: the status and error of a refused call, having checked that nothing changed."""
    before = [message.body for message in api.broker.engine.queues["/queue/orders"].pending]
    code, error, _ = api.call(method, path, body, headers)
    assert code >= 400 and set(error) == {"error", "detail"}
    assert [message.body for message in api.broker.engine.queues["/queue/orders"].pending] == before
    assert set(api.broker.engine.queues) == {"/queue/orders"}
    return code, error


def bearer(token: str) -> dict[str, str]:
    """:returns: an Authorization header with a bearer token."""
    return {"Authorization": f"Bearer {token}"}
