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

The handlers are functions of the session, which its ``HANDLERS`` table
names: SEND is the commonest frame, and a function costs no more than a
method of the session did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stompbroker.protocol.config import WRITE
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.login import CONTROL_PREFIX
from stompbroker.protocol.subscriptions import TEMP_QUEUE_PREFIX

if TYPE_CHECKING:
    from stompbroker.protocol.session import StompSession

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


def on_send(session: StompSession, frame: Frame) -> None:
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
        session.login.on_control(frame, destination)
        return
    access = session.config.access
    if access is not None:
        if "," in destination:
            # A composite destination: the right is needed on every part.
            for part in destination.split(","):
                access.check(session.identity, WRITE, part.strip(" \t"))
        else:
            access.check(session.identity, WRITE, destination)
    if reply_to is not None and reply_to.startswith(TEMP_QUEUE_PREFIX):
        session.subscriptions.subscribe_to_replies(reply_to)
    session.messages_received += 1
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
    waiting = session.broker.send(
        destination,
        tuple(headers),
        frame.body,
        connection=session,
        transaction=transaction,
        lines=lines,
    )
    if waiting is not None:
        session.receipts.when_stored(waiting, frame, len(frame.body))
    elif receipt is not None:
        session.receipts.send_receipt(receipt)


def on_begin(session: StompSession, frame: Frame) -> None:
    # A transaction starts, and is committed, once what came before is stored.
    if session.receipts.after_replies(frame):
        return
    session.broker.begin(session, frame.required("transaction"))
    session.receipts.receipt(frame)


def on_commit(session: StompSession, frame: Frame) -> None:
    if session.receipts.after_replies(frame):
        return
    waiting = session.broker.commit(session, frame.required("transaction"))
    session.receipts.when_stored(waiting, frame)


def on_abort(session: StompSession, frame: Frame) -> None:
    session.broker.abort(session, frame.required("transaction"))
    session.receipts.receipt(frame)
