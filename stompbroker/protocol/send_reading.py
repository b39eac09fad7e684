"""
What the client publishes: reading a SEND frame for the broker.

Authorization (when ``SessionConfig.access`` is set): every SEND needs the
``write`` right on its destination (on each part of a composite destination,
``/queue/a,/topic/b``), checked frame by frame, so that a reloaded
access file applies to connected clients at once.  ``/control/`` is the
broker's own: a SEND there never reaches the broker's routing
(:mod:`stompbroker.protocol.login`).  A SEND with a ``reply-to``
naming a temporary queue subscribes the sender to it, as RabbitMQ does.  What
the broker stores is waited for as :mod:`stompbroker.protocol.receipts` says,
within the window of :mod:`stompbroker.protocol.write_window`.  The session's
SEND, BEGIN, COMMIT and ABORT handlers sequence those parts; this module is
the pure reading of the frame (:func:`read_send`), which SEND, the commonest
frame, needs in one pass.
"""

from __future__ import annotations

from stompbroker.protocol.frames import Frame

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

#: What :func:`read_send` finds: destination, the user headers, ``transaction``,
#: ``receipt``, ``reply-to``, and the user header lines as they came (or ``None``).
SendFields = tuple[
    str, tuple[tuple[str, str], ...], str | None, str | None, str | None, bytes | None
]


def read_send(frame: Frame) -> SendFields:
    """
    Read a SEND: what the session acts on, and what the message keeps.

    One pass over the headers finds what the session acts on and keeps the
    first of each user header (STOMP 1.2, Repeated Header Entries).

    :raises MissingHeader: for a SEND without ``destination``.
    """
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
    return destination, tuple(headers), transaction, receipt, reply_to, lines
