"""
Queue browsers: SUBSCRIBE ``browser:true`` looks at what waits in a queue without taking it.

Apollo's convention, which its STOMP clients rely on: a SUBSCRIBE to a queue
with ``browser:true`` gets a copy of every message waiting in the queue, in the
order the queue would deliver them (oldest first, higher priorities first),
then one MESSAGE with the header ``browser:end`` and an empty body.  Nothing is
consumed: the messages stay in the queue for its consumers, and the browser's
subscription takes nothing more (the client unsubscribes when it likes).

- Only what *waits* is browsed: messages delivered to a consumer and not yet
  acknowledged are not in the queue until they come back.
- A browser acknowledges nothing, so it must subscribe with ``ack:auto`` (the
  default); another ack mode is an ERROR rather than a subscription whose ACKs
  would all fail.
- Browsing reads, so it needs the ``read`` right of the access rules, as any
  SUBSCRIBE does: the session checks it before the broker sees the frame.
- Topics hold nothing to browse, and an engine whose queues are shared by
  several processes (the redis engine) does not see every waiting message in one
  place: both are refused with an ERROR.
"""

from __future__ import annotations

from typing import Any

from stompbroker.broker.routing.destinations import QUEUE_PREFIX, TEMP_QUEUE_PREFIX
from stompbroker.protocol.errors import InvalidDestination, MalformedFrame, NotSupported
from stompbroker.protocol.message import Message

__all__ = ["BROWSER_HEADER", "END_VALUE", "browse", "check_browser", "is_browser"]

#: The SUBSCRIBE header that makes a browser, and the MESSAGE header that ends its copies.
BROWSER_HEADER = "browser"
#: The ``browser`` header's value on the MESSAGE that says the browse is complete.
END_VALUE = "end"
#: The destinations that hold messages to browse.
BROWSABLE = (QUEUE_PREFIX, TEMP_QUEUE_PREFIX)


def is_browser(subscriber: Any) -> bool:
    """
    :param subscriber: the SUBSCRIBE's :class:`~stompbroker.interfaces.ISubscriber`.
    :returns: whether it asks to browse (``browser:true``).
    :raises MalformedFrame: for a ``browser`` header that is not ``true`` or ``false``.
    """
    value = subscriber.headers.get(BROWSER_HEADER)
    if value is None or value == "false":
        return False
    if value != "true":
        raise MalformedFrame(
            f"invalid {BROWSER_HEADER} header",
            f"{BROWSER_HEADER} must be true or false, got {value!r}",
        )
    return True


def check_browser(engine: Any, subscriber: Any) -> None:
    """
    Refuse a browser that cannot be served, before any queue is looked up.

    :param engine: the :class:`~stompbroker.broker.engine.base.IEngine`.
    :param subscriber: the browser.
    :raises InvalidDestination: for a destination that is not a queue.
    :raises MalformedFrame: for a browser that is not ``ack:auto``.
    :raises NotSupported: on an engine whose queues are shared between processes.
    """
    destination = subscriber.destination
    if not destination.startswith(BROWSABLE):
        raise InvalidDestination(
            "only queues can be browsed",
            f"browser:true needs a /queue/ or /temp-queue/ destination; {destination!r}"
            " holds no messages to browse",
        )
    if subscriber.ack_mode != "auto":
        raise MalformedFrame(
            "a queue browser acknowledges nothing",
            "subscribe with browser:true and ack:auto (the default), not"
            f" ack:{subscriber.ack_mode}",
        )
    if engine.shared_queues and destination.startswith(QUEUE_PREFIX):
        raise NotSupported(
            "queue browsers are not supported by the redis engine yet",
            "this broker runs on the redis engine, whose queues are shared by nodes that"
            " each see only what they have read (docs/cluster.md)",
        )


def browse(engine: Any, queue: Any, subscriber: Any) -> int:
    """
    Send ``subscriber`` a copy of every message waiting in ``queue``, then the end marker.

    :param engine: the engine, whose ids give the end marker its ``message-id``.
    :param queue: the queue's :class:`~stompbroker.broker.queueing.queues.WorkerQueue`.
    :param subscriber: the browser, checked by :func:`check_browser`.
    :returns: how many messages were copied.
    """
    # A list first: a delivery may re-enter the queue (a client's ACK of another
    # subscription), which must not change what is being iterated.
    waiting = list(queue.pending)
    for message in waiting:
        subscriber.deliver(message)
    subscriber.deliver(
        Message(
            queue.destination,
            engine.ids.new_message_id(),
            ((BROWSER_HEADER, END_VALUE),),
            b"",
        )
    )
    return len(waiting)
