"""
Webhooks: the broker tells an application's server, over HTTP, that a
destination became occupied or vacated and that a member joined or left it,
as Pusher's and Centrifugo's webhooks do (docs/backend.md, "Webhooks").

:class:`Webhooks` gathers the events of a short moment into one batch (a POST
of ``{"time_ms": ..., "events": [...]}``), signs it with the shared secret
(:func:`signature`: HMAC-SHA256 of the body, as Pusher signs its webhooks) and
hands it to ``post``, an adapter that makes the request
(:mod:`stompbroker.web.webhook_sender`).  A batch that fails (no answer, an
error, a status other than 2xx) is posted again after a back-off
(:data:`RETRY_DELAYS`), up to :data:`MAX_AGE` seconds after it was made, then
dropped with one log line; while one batch is being delivered the next ones
wait, so that the application gets them in order.  At most
:data:`MAX_WAITING` batches wait: past it the oldest go, counted.

Pure but for the ``post`` callable and the clock's ``callLater``: no socket.

On the redis engine each node reports what its own subscriptions change
(:mod:`stompbroker.broker.features.presence` calls it), so every event is sent
once, by the node where it happened; two nodes whose first subscribers come at
the same moment may both report the destination occupied (the events are at
least once: an application keys them by destination).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import deque
from collections.abc import Callable
from typing import Any

from attrs import define, field
from twisted.internet.defer import Deferred, maybeDeferred

from stompbroker.logs import logger

__all__ = [
    "BATCH_DELAY",
    "MAX_AGE",
    "MAX_WAITING",
    "RETRY_DELAYS",
    "SIGNATURE_HEADER",
    "WebhookFigures",
    "Webhooks",
    "signature",
]

log = logger("stompbroker.webhooks")

#: Seconds the events of one moment gather before their batch is posted.
BATCH_DELAY = 0.05
#: Seconds between a failed post and the next, one after the other; the last repeats.
RETRY_DELAYS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
#: Seconds after which a batch that could not be delivered is dropped.
MAX_AGE = 600.0
#: Batches that may wait for delivery; past it the oldest is dropped.
MAX_WAITING = 1000
#: The request header that carries the body's signature.
SIGNATURE_HEADER = "X-Stompbroker-Signature"

OCCUPIED = "destination_occupied"
VACATED = "destination_vacated"
MEMBER_ADDED = "member_added"
MEMBER_REMOVED = "member_removed"

#: ``post(body, headers)``: a Deferred firing with the HTTP status, or failing.
Post = Callable[[bytes, dict[str, str]], Deferred[int]]


def signature(secret: bytes, body: bytes) -> str:
    """:returns: ``sha256=HEX``, the HMAC-SHA256 of ``body`` under ``secret``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


@define
class WebhookFigures:
    """
    What the webhooks have done, for statistics and the log.

    :ivar events: events reported.
    :ivar delivered: batches the application answered with a 2xx.
    :ivar retried: posts made again after a failure.
    :ivar dropped: batches given up (too old, or too many waiting).
    """

    events: int = 0
    delivered: int = 0
    retried: int = 0
    dropped: int = 0


@define
class _Batch:
    body: bytes
    made: float
    attempts: int = 0


@define
class Webhooks:
    """
    The events of this node's subscriptions, posted in signed batches.

    :param post: the adapter that makes one request.
    :param secret: the secret shared with the application.
    :param clock: ``seconds()`` and ``callLater()``.
    """

    post: Post
    secret: bytes = field(repr=False)
    clock: Any
    figures: WebhookFigures = field(factory=WebhookFigures)
    _events: list[dict[str, Any]] = field(factory=list)
    _waiting: deque[_Batch] = field(factory=deque)
    _gathering: Any = None
    _sending: bool = False
    _failing: bool = False

    def occupied(self, destination: str) -> None:
        """``destination`` got its first subscriber (of any node)."""
        self._add({"name": OCCUPIED, "destination": destination})

    def vacated(self, destination: str) -> None:
        """``destination`` lost its last subscriber."""
        self._add({"name": VACATED, "destination": destination})

    def member_added(self, destination: str, member: dict[str, Any]) -> None:
        """A member (a user) joined ``destination``: its first subscription there."""
        self._add({"name": MEMBER_ADDED, "destination": destination, "member": member})

    def member_removed(self, destination: str, member: dict[str, Any]) -> None:
        """A member left ``destination``: its last subscription there went."""
        self._add({"name": MEMBER_REMOVED, "destination": destination, "member": member})

    def _add(self, event: dict[str, Any]) -> None:
        self.figures.events += 1
        self._events.append(event)
        if self._gathering is None:
            self._gathering = self.clock.callLater(BATCH_DELAY, self._seal)

    def _seal(self) -> None:
        """The moment is over: its events become a batch, which waits its turn."""
        self._gathering = None
        events, self._events = self._events, []
        now = self.clock.seconds()
        body = json.dumps({"time_ms": int(now * 1000), "events": events}).encode()
        if len(self._waiting) >= MAX_WAITING:
            self._waiting.popleft()
            self._drop("too many batches wait")
        self._waiting.append(_Batch(body, now))
        if not self._sending:
            self._send()

    def _send(self) -> None:
        """Post the oldest waiting batch, if any."""
        if not self._waiting:
            self._sending = False
            return
        self._sending = True
        batch = self._waiting[0]
        batch.attempts += 1
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signature(self.secret, batch.body),
        }
        posted = maybeDeferred(self.post, batch.body, headers)
        posted.addCallbacks(
            self._answered, self._failed, callbackArgs=(batch,), errbackArgs=(batch,)
        )

    def _answered(self, status: int, batch: _Batch) -> None:
        if 200 <= status < 300:
            self._delivered(batch)
        else:
            self._retry(batch, f"the application answered HTTP {status}")

    def _failed(self, failure: Any, batch: _Batch) -> None:
        self._retry(batch, failure.getErrorMessage() or type(failure.value).__name__)

    def _delivered(self, batch: _Batch) -> None:
        self.figures.delivered += 1
        if self._failing:
            self._failing = False
            log.info("webhooks delivered again")
        self._waiting.popleft()
        self._send()

    def _retry(self, batch: _Batch, why: str) -> None:
        if not self._failing:
            self._failing = True
            log.warn("webhook delivery failed ({why}); retrying", why=why)
        if self.clock.seconds() - batch.made >= MAX_AGE:
            self._waiting.popleft()
            self._drop(f"undelivered for {MAX_AGE:g} s")
            self._send()
            return
        self.figures.retried += 1
        delay = RETRY_DELAYS[min(batch.attempts, len(RETRY_DELAYS)) - 1]
        self.clock.callLater(delay, self._send)

    def _drop(self, why: str) -> None:
        self.figures.dropped += 1
        log.warn("dropped a batch of webhook events: {why}", why=why)
