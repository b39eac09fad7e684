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
- Topics hold nothing to browse: refused with an ERROR.
- On the redis engine a browser on any node sees what waits in the whole
  cluster: the queue's stream, and what any node has read ahead for its
  consumers and not handed out (docs/cluster.md, "Queue browsers"); its copies
  come once the nodes have answered, so a message published meanwhile may or
  may not be among them.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen
from twisted.internet.defer import Deferred

from stompbroker.broker.engine.capabilities import require
from stompbroker.broker.routing.destinations import QUEUE_PREFIX, TEMP_QUEUE_PREFIX
from stompbroker.logs import logger
from stompbroker.protocol.errors import InvalidDestination, MalformedFrame
from stompbroker.protocol.message import Message

__all__ = ["BROWSER_HEADER", "END_VALUE", "Waiting", "browse", "check_browser", "is_browser"]

log = logger("stompbroker.broker")

#: The SUBSCRIBE header that makes a browser, and the MESSAGE header that ends its copies.
BROWSER_HEADER = "browser"
#: The ``browser`` header's value on the MESSAGE that says the browse is complete.
END_VALUE = "end"
#: The destinations that hold messages to browse.
BROWSABLE = (QUEUE_PREFIX, TEMP_QUEUE_PREFIX)


@frozen
class Waiting:
    """
    What waits in a queue for a consumer, as an engine sees it
    (:meth:`~stompbroker.broker.engine.engine_interface.IEngine.waiting`).

    :ivar messages: the waiting messages, in the order the queue hands them out.
    :ivar node: the node that answered (its node token).
    :ivar missing: nodes that hold messages of the queue and did not answer
        in time (an engine shared by several nodes): what they read ahead is
        not among ``messages``.
    """

    messages: tuple[Message, ...]
    node: str
    missing: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether every node that holds messages of the queue answered."""
        return not self.missing


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

    :param engine: the :class:`~stompbroker.broker.engine.engine_interface.IEngine`.
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
    if destination.startswith(QUEUE_PREFIX):
        require(engine.capabilities(), "browse")


def browse(engine: Any, queue: Any, subscriber: Any) -> Deferred[int] | int:
    """
    Send ``subscriber`` a copy of every message waiting in ``queue``, then the end marker.

    :param engine: the engine, which says what waits
        (:meth:`~stompbroker.broker.engine.engine_interface.IEngine.waiting`) and whose ids
        give the end marker its ``message-id``.
    :param queue: the queue.
    :param subscriber: the browser, checked by :func:`check_browser`.
    :returns: how many messages were copied, or a Deferred firing with it
        (an engine whose queues are shared answers later).
    """
    waiting = engine.waiting(queue)
    destination = queue.destination
    if isinstance(waiting, Deferred):
        waiting.addCallback(_copy, engine, destination, subscriber)
        return waiting.addErrback(_not_browsed, destination)
    return _copy(waiting, engine, destination, subscriber)


def _not_browsed(failure: Any, destination: str) -> int:
    """The engine could not say what waits (its server is away): the browser gets nothing."""
    log.failure("browsing {queue} failed", failure, queue=destination)
    return 0


def _copy(waiting: Waiting, engine: Any, destination: str, subscriber: Any) -> int:
    """Deliver the copies and the end marker."""
    # A tuple already: a delivery may re-enter the queue (a client's ACK of
    # another subscription), which must not change what is being sent.
    for message in waiting.messages:
        subscriber.deliver(message)
    subscriber.deliver(
        Message(
            destination,
            engine.bookkeeping().ids.new_message_id(),
            ((BROWSER_HEADER, END_VALUE),),
            b"",
        )
    )
    return len(waiting.messages)
