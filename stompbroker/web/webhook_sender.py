"""
The webhooks' HTTP side: one POST of a signed batch to the application's URL
(``--webhook URL``), on treq's client with persistent connections, bounded by
a timeout.  What is posted, when, and what a failure costs is
:mod:`stompbroker.broker.features.webhooks`'s.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.security.http_endpoint import pooled_client

__all__ = ["POST_TIMEOUT", "WebhookSender"]

#: Seconds the application has to answer a post; past it the post failed.
POST_TIMEOUT = 10.0


class WebhookSender:
    """
    ``post(body, headers)`` for :class:`~stompbroker.broker.features.webhooks.Webhooks`.

    :param url: where the application takes the webhooks.
    :param reactor: runs the requests.
    :param client: has treq's ``post``; treq's on a persistent pool of
        ``reactor`` by default (tests pass ``treq.testing.StubTreq``).
    """

    def __init__(self, url: str, reactor: Any, client: Any = None) -> None:
        self.url = url
        self._client = client if client is not None else pooled_client(reactor)

    def __call__(self, body: bytes, headers: dict[str, str]) -> Deferred[int]:
        """:returns: a Deferred of the answer's status; it fails on no answer in time."""
        posting: Deferred[Any] = self._client.post(
            self.url, data=body, headers=headers, timeout=POST_TIMEOUT
        )
        return posting.addCallback(_status)


def _status(response: Any) -> Deferred[int]:
    """Read the answer's body (so that the connection is reused), then give its status."""
    code: int = response.code
    reading: Deferred[Any] = response.content()
    return reading.addCallback(lambda _: code)
