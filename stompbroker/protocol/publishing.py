"""
What the client publishes: SEND, and the transactions (BEGIN, COMMIT, ABORT)
that group SENDs and acknowledgements.

Authorization (when ``SessionConfig.access`` is set): every SEND needs the
``write`` right on its destination (on each part of a composite destination,
``/queue/a,/topic/b``), checked frame by frame, so that a reloaded
access file applies to connected clients at once.  ``/control/`` is the
broker's own: a SEND there never reaches the broker's routing
(:mod:`stompbroker.protocol.login`).  A SEND with a ``reply-to``
naming a temporary queue subscribes the sender to it, as RabbitMQ does.  What
the broker stores is waited for as :mod:`stompbroker.protocol.receipts` says,
within the window of :mod:`stompbroker.protocol.write_window`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stompbroker.protocol.config import WRITE
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.login import CONTROL_PREFIX
from stompbroker.protocol.parts import SessionPart
from stompbroker.protocol.subscriptions import TEMP_QUEUE_PREFIX

#: Headers of a SEND that concern the hop from client to broker, or that the
#: broker writes itself; they are not forwarded to subscribers.
HOP_HEADERS: frozenset[str] = frozenset(
    {
        "destination",
        "receipt",
        "transaction",
        "content-length",
        "message-id",
        "subscription",
        "ack",
    }
)


class PublishingMixin(SessionPart):
    """
    The session's SEND, BEGIN, COMMIT and ABORT handlers.  Mixed into
    :class:`~stompbroker.protocol.session.StompSession`, as its other parts are:
    SEND is the commonest frame, and must cost no call between objects.
    """

    __slots__ = ()

    # Of the session's other parts.
    identity: Any
    messages_received: int
    _receipt: Callable[[Frame], None]
    _send_receipt: Callable[..., None]
    _receipt_when_stored: Callable[..., None]
    _after_replies: Callable[[Frame], bool]
    _subscribe_to_replies: Callable[[str], None]
    _on_control: Callable[[Frame, str], None]

    def _on_send(self, frame: Frame) -> None:
        # One pass over the headers finds what the session acts on and keeps the
        # first of each user header: a SEND is the commonest frame.
        destination = transaction = receipt = reply_to = None
        seen: set[str] = set()
        headers = []
        for pair in frame.headers:
            name = pair[0]
            if name in seen:
                continue
            seen.add(name)
            if name in HOP_HEADERS:
                if name == "destination":
                    destination = pair[1]
                elif name == "receipt":
                    receipt = pair[1]
                elif name == "transaction":
                    transaction = pair[1]
                continue
            if name == "reply-to":
                reply_to = pair[1]
            headers.append(pair)
        if destination is None:
            destination = frame.required("destination")
        if destination.startswith(CONTROL_PREFIX):
            self._on_control(frame, destination)
            return
        access = self.config.access
        if access is not None:
            if "," in destination:
                # A composite destination: the right is needed on every part.
                for part in destination.split(","):
                    access.check(self.identity, WRITE, part.strip(" \t"))
            else:
                access.check(self.identity, WRITE, destination)
        if reply_to is not None and reply_to.startswith(TEMP_QUEUE_PREFIX):
            self._subscribe_to_replies(reply_to)
        self.messages_received += 1
        # A plain SEND keeps its user header lines as they came, for the message
        # to hold (one bytes object instead of a tuple of pairs while it waits in
        # a queue) and to copy into its MESSAGE frames.  Plain: the lines are
        # what the pairs above say, in order: only ``destination`` (first) and
        # ``content-length`` (last, if any) were left out, with nothing repeated
        # or carrying a second colon (the parser keeps no lines with an escape).
        lines = None
        raw = frame.raw
        if raw is not None and headers:
            given = frame.headers
            left_out = len(given) - len(headers)
            if given[0][0] == "destination" and (
                left_out == 1 or (left_out == 2 and given[-1][0] == "content-length")
            ):
                # The first line is "destination:VALUE" (an ASCII value is as many
                # bytes as characters), the last, if left out, "content-length:DIGITS".
                start = 13 + len(destination) if destination.isascii() else raw.find(b"\n") + 1
                end = len(raw) - 16 - len(given[-1][1]) if left_out == 2 else len(raw)
                lines = raw[start:end]
                if lines.count(b":") != len(headers):
                    lines = None
        waiting = self.broker.send(
            destination,
            tuple(headers),
            frame.body,
            connection=self,
            transaction=transaction,
            lines=lines,
        )
        if waiting is not None:
            self._receipt_when_stored(waiting, frame, len(frame.body))
        elif receipt is not None:
            self._send_receipt(receipt)

    def _on_begin(self, frame: Frame) -> None:
        # A transaction starts, and is committed, once what came before is stored.
        if self._after_replies(frame):
            return
        self.broker.begin(self, frame.required("transaction"))
        self._receipt(frame)

    def _on_commit(self, frame: Frame) -> None:
        if self._after_replies(frame):
            return
        waiting = self.broker.commit(self, frame.required("transaction"))
        self._receipt_when_stored(waiting, frame)

    def _on_abort(self, frame: Frame) -> None:
        self.broker.abort(self, frame.required("transaction"))
        self._receipt(frame)
