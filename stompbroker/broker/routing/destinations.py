"""
The kinds of destination the broker serves, and the names it derives from them.

A destination's prefix says what it is, as in RabbitMQ's and ActiveMQ's STOMP
support:

- ``/topic/NAME``: publish-subscribe; every matching subscription gets a copy.
- ``/queue/NAME``: a worker queue; each message goes to one consumer.  Created on
  first use.
- ``/temp-queue/NAME``: a queue private to one connection; NAME is that
  connection's own name for it.
- ``/reply-queue/ID``: the broker-unique name a temporary queue is known by to
  other connections (a ``reply-to:/temp-queue/NAME`` header is rewritten to it).
  Others may SEND to it; nobody may subscribe to it.
- ``/user/queue/NAME`` (SUBSCRIBE) and ``/user/LOGIN/queue/NAME`` (SEND), with
  ``topic`` for ``queue`` alike: messages to a user, wherever the user is
  connected (:mod:`stompbroker.broker.features.user_destinations`).
- ``/stream/NAME``: an append-only log that every subscription reads from an
  offset of its own (:mod:`stompbroker.broker.streams`).  Created on first use;
  no wildcards.

Anything else is an error, as it is in RabbitMQ.  Queue names are compared
exactly as written; topic names go through the subscription tree, where ``/``
and ``.`` are one separator.
"""

from __future__ import annotations

import enum

from stompbroker.broker.features.user_destinations import send_key
from stompbroker.broker.routing.syntax import is_wildcard, validate_destination
from stompbroker.protocol.errors import InvalidDestination

TOPIC_PREFIX = "/topic/"
QUEUE_PREFIX = "/queue/"
TEMP_QUEUE_PREFIX = "/temp-queue/"
REPLY_QUEUE_PREFIX = "/reply-queue/"
STREAM_PREFIX = "/stream/"
USER_PREFIX = "/user/"


class Kind(enum.Enum):
    """What a destination is, by its prefix."""

    TOPIC = TOPIC_PREFIX
    QUEUE = QUEUE_PREFIX
    TEMP_QUEUE = TEMP_QUEUE_PREFIX
    REPLY_QUEUE = REPLY_QUEUE_PREFIX
    STREAM = STREAM_PREFIX
    USER = USER_PREFIX


_PREFIXES = tuple((kind.value, kind) for kind in Kind)


def kind_of(destination: str) -> Kind:
    """
    Tell what a destination is.

    :param destination: as the client sent it.
    :returns: its :class:`Kind`.
    :raises InvalidDestination: for a prefix the broker does not serve.
    """
    for prefix, kind in _PREFIXES:
        if destination.startswith(prefix):
            return kind
    raise InvalidDestination(
        "unknown destination",
        f"{destination!r} is not a destination this broker serves; use /topic/NAME,"
        " /queue/NAME, /temp-queue/NAME, /stream/NAME or /user/...",
    )


def name_of(destination: str) -> str:
    """
    :param destination: a destination of a served kind.
    :returns: the part after its kind's prefix, e.g. ``orders`` for ``/queue/orders``.
    """
    return destination[len(kind_of(destination).value) :]


def validate_queue(destination: str) -> None:
    """
    Check a queue destination, for SEND and SUBSCRIBE alike.

    Queues have no wildcards: a consumer takes messages from one queue.

    :param destination: ``/queue/NAME``, ``/temp-queue/NAME`` or ``/reply-queue/ID``.
    :raises InvalidDestination: for an empty name, an empty segment or a wildcard.
    """
    _validate_one(destination, "queue", "wildcards are allowed only in topic subscriptions.")


def validate_stream(destination: str) -> None:
    """
    Check a stream destination, for SEND and SUBSCRIBE alike.

    A stream subscription reads one log from an offset of its own; a wildcard
    would mix several logs' offsets, so it is refused.

    :param destination: ``/stream/NAME``.
    :raises InvalidDestination: for an empty name, an empty segment or a wildcard.
    """
    _validate_one(
        destination,
        "stream",
        "a stream subscription reads one stream from its own offset, so subscribe to"
        " each stream by name.",
    )


def _validate_one(destination: str, kind: str, why: str) -> None:
    """
    Check a destination that names exactly one ``kind`` (``queue``, ``stream``).

    :param why: says, after the wildcard found, why there may be none.
    :raises InvalidDestination: for an empty name, an empty segment or a wildcard.
    """
    if is_wildcard(destination):
        raise InvalidDestination(
            f"wildcard in {kind} destination",
            f"The destination {destination!r} holds a wildcard; {why}",
        )
    if not name_of(destination):
        raise InvalidDestination(
            f"empty {kind} name", f"The destination {destination!r} names no {kind}."
        )
    validate_destination(destination)


def validate_send_destination(destination: str) -> Kind:
    """
    Check a destination a SEND may name: one topic or one queue, no wildcard.

    :param destination: as the client sent it.
    :returns: its :class:`Kind`.
    :raises InvalidDestination: for an unknown kind, an empty name or segment, or a
        wildcard.
    """
    kind = kind_of(destination)
    if kind is Kind.TOPIC:
        validate_destination(destination)
    elif kind is Kind.STREAM:
        validate_stream(destination)
    elif kind is Kind.USER:
        send_key(destination)
    else:
        validate_queue(destination)
    return kind


def dead_letter_destination(origin: str, prefix: str) -> str:
    """
    Name the dead-letter queue for messages that failed on their way from ``origin``.

    :param origin: the destination the message was sent to, e.g. ``/queue/orders``
        or ``/topic/prices.eur``.
    :param prefix: the ``--dead-letter-prefix``, e.g. ``DLQ.``.
    :returns: e.g. ``/queue/DLQ.orders``.
    """
    return QUEUE_PREFIX + prefix + name_of(origin)


def is_dead_letter_queue(destination: str, prefix: str) -> bool:
    """
    :returns: whether ``destination`` is a dead-letter queue under ``prefix``, whose
        failed messages are discarded rather than dead-lettered again.
    """
    return destination.startswith(QUEUE_PREFIX + prefix)
