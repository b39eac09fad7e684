"""
Which consumer of a queue gets the next message: priorities, exclusive and single-active consumers.

Headers (SUBSCRIBE), as ActiveMQ's and RabbitMQ's STOMP clients send them:

- ``activemq.priority`` / ``x-priority``: the consumer's priority, an integer
  (default 0; ActiveMQ uses 0 to 127, RabbitMQ any integer, negative too).
  Messages go to the highest-priority consumers that have room, round-robin among
  those of one priority; lower ones get messages only while every higher one is
  full.  Both headers mean the same; given together they must agree.
- ``activemq.exclusive:true``: an exclusive consumer.  While a queue has one, it
  alone gets the queue's messages (the *active* consumer); the others wait, and
  the next takes over when it leaves.
- ``x-single-active-consumer:true``: RabbitMQ's queue argument, which the SUBSCRIBE
  that creates the queue declares: every consumer of the queue is then treated as
  exclusive.  Later SUBSCRIBEs cannot change it (RabbitMQ refuses to redeclare a
  queue with other arguments; here the first declaration stands).

The active consumer is the candidate of the highest priority, the earliest to
subscribe among equals; it stays active until it leaves or a candidate of a
strictly higher priority subscribes (so that priorities mean the same with and
without exclusivity; an equal newcomer never takes over, which would move
messages back and forth).  The active consumer's messages wait while it is
full: they are not handed to a standby consumer.

How it plugs in
---------------
The broker's consumers (:mod:`stompbroker.broker.clients.consumers`) parse a queue
SUBSCRIBE with :func:`parse_consumer_options`, which raises
:class:`~stompbroker.protocol.errors.MalformedFrame` (an ERROR) for a bad
value, and pass the options to the queue's ``add_consumer`` unless they are
:attr:`ConsumerOptions.is_plain`; the :class:`~stompbroker.broker.queueing.delivery.Consumer`
keeps them.  A queue with such a consumer dispatches through a
:class:`~stompbroker.broker.queueing.dispatch.FeatureDispatch`, which keeps a
:class:`ConsumerChoice` of the queue's consumers (single-active when the
SUBSCRIBE that found the queue without consumers declared it) and asks
:meth:`~ConsumerChoice.next` with ``Consumer.has_room`` for each message.  A
queue whose consumers ask for none of this keeps its own inlined round-robin
loop, so the common case costs what it costs now.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Generic, TypeVar

from attrs import frozen

from stompbroker.protocol.errors import MalformedFrame

__all__ = [
    "EXCLUSIVE_HEADER",
    "PRIORITY_HEADERS",
    "SINGLE_ACTIVE_HEADER",
    "ConsumerChoice",
    "ConsumerOptions",
    "parse_consumer_options",
]

#: SUBSCRIBE headers that set a consumer's priority; synonyms.
PRIORITY_HEADERS = ("activemq.priority", "x-priority")
#: SUBSCRIBE header that makes a consumer exclusive (ActiveMQ).
EXCLUSIVE_HEADER = "activemq.exclusive"
#: SUBSCRIBE header that declares a single-active-consumer queue (RabbitMQ).
SINGLE_ACTIVE_HEADER = "x-single-active-consumer"

#: Consumer priorities are 32-bit signed integers, as RabbitMQ's are.
MIN_PRIORITY = -(2**31)
MAX_PRIORITY = 2**31 - 1

_C = TypeVar("_C", bound=Hashable)


@frozen
class ConsumerOptions:
    """
    How one SUBSCRIBE asks to be served.

    :ivar priority: higher is served first; 0 by default.
    :ivar exclusive: whether the consumer asked to be the queue's only active one.
    :ivar single_active: ``x-single-active-consumer`` as given: ``None`` when absent,
        so the queue can tell "not declared" from "declared false".
    """

    priority: int = 0
    exclusive: bool = False
    single_active: bool | None = None

    @property
    def is_plain(self) -> bool:
        """Whether it asks for nothing a plain round-robin consumer lacks."""
        return self.priority == 0 and not self.exclusive and not self.single_active


def _boolean(name: str, value: str) -> bool:
    """:raises MalformedFrame: unless ``value`` is ``true`` or ``false`` (any case)."""
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise MalformedFrame(f"invalid {name} header", f"{name} must be true or false, got {value!r}")


def _priority(name: str, value: str) -> int:
    """:raises MalformedFrame: unless ``value`` is an integer in the 32-bit range."""
    digits = value[1:] if value[:1] == "-" else value
    if not (digits.isascii() and digits.isdigit()):
        raise MalformedFrame(f"invalid {name} header", f"{name} must be an integer, got {value!r}")
    priority = int(value)
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise MalformedFrame(
            f"invalid {name} header",
            f"{name} must be from {MIN_PRIORITY} to {MAX_PRIORITY}, got {value}",
        )
    return priority


def parse_consumer_options(headers: Mapping[str, str]) -> ConsumerOptions:
    """
    Read a SUBSCRIBE's consumer headers.

    :param headers: the frame's headers, first of a repeated header winning
        (:meth:`~stompbroker.protocol.frames.Frame.header_dict`).
    :returns: the options; the defaults for a SUBSCRIBE that sets none.
    :raises MalformedFrame: for a value that is not a boolean or an integer as
        required, or for ``activemq.priority`` and ``x-priority`` that disagree.
    """
    priorities = {
        name: _priority(name, headers[name]) for name in PRIORITY_HEADERS if name in headers
    }
    if len(set(priorities.values())) > 1:
        raise MalformedFrame(
            "conflicting consumer priorities",
            "activemq.priority and x-priority are synonyms; they must agree, got"
            f" {priorities['activemq.priority']} and {priorities['x-priority']}",
        )
    exclusive = headers.get(EXCLUSIVE_HEADER)
    single_active = headers.get(SINGLE_ACTIVE_HEADER)
    return ConsumerOptions(
        priority=next(iter(priorities.values()), 0),
        exclusive=exclusive is not None and _boolean(EXCLUSIVE_HEADER, exclusive),
        single_active=None
        if single_active is None
        else _boolean(SINGLE_ACTIVE_HEADER, single_active),
    )


class _PriorityClass(Generic[_C]):
    """The consumers of one priority, in order of arrival, and whose turn is next."""

    __slots__ = ("members", "turn")

    def __init__(self) -> None:
        self.members: list[_C] = []
        self.turn = 0


class ConsumerChoice(Generic[_C]):
    """
    A queue's consumers by priority, and the pick of the next one to serve.

    Consumers are any hashable objects; whether one has room is asked of the
    caller at each pick, so the window and flow-control logic stays in
    :class:`~stompbroker.broker.queueing.delivery.Consumer`.

    :param single_active: the queue was declared ``x-single-active-consumer:true``:
        every consumer counts as exclusive.
    """

    __slots__ = (
        "_options",
        "_classes",
        "_descending",
        "_active",
        "_exclusive_count",
        "single_active",
    )

    def __init__(self, *, single_active: bool = False) -> None:
        self.single_active = single_active
        self._options: dict[_C, ConsumerOptions] = {}
        self._classes: dict[int, _PriorityClass[_C]] = {}
        #: The priorities that have consumers, highest first.
        self._descending: list[int] = []
        self._active: _C | None = None
        self._exclusive_count = 0

    def __len__(self) -> int:
        return len(self._options)

    def __contains__(self, consumer: object) -> bool:
        return consumer in self._options

    @property
    def is_plain(self) -> bool:
        """Whether plain round-robin over all consumers is what :meth:`next` would do."""
        return len(self._descending) <= 1 and not self.is_exclusive

    @property
    def is_exclusive(self) -> bool:
        """Whether one active consumer gets every message (single-active, or anyone exclusive)."""
        return self.single_active or self._exclusive_count > 0

    @property
    def active(self) -> _C | None:
        """The consumer that gets every message while :attr:`is_exclusive`; else ``None``."""
        return self._active

    def add(self, consumer: _C, options: ConsumerOptions = ConsumerOptions()) -> None:
        """
        Start serving a consumer.

        :raises ValueError: if it is already served.
        """
        if consumer in self._options:
            raise ValueError(f"{consumer!r} is already a consumer")
        self._options[consumer] = options
        priority = options.priority
        members = self._classes.get(priority)
        if members is None:
            members = self._classes[priority] = _PriorityClass()
            self._descending.append(priority)
            self._descending.sort(reverse=True)
        members.members.append(consumer)
        if options.exclusive:
            self._exclusive_count += 1
        self._elect(newcomer=consumer)

    def remove(self, consumer: _C) -> None:
        """Stop serving a consumer; a no-op for one not served."""
        options = self._options.pop(consumer, None)
        if options is None:
            return
        priority_class = self._classes[options.priority]
        members = priority_class.members
        index = members.index(consumer)
        del members[index]
        if index < priority_class.turn:
            priority_class.turn -= 1
        if not members:
            del self._classes[options.priority]
            self._descending.remove(options.priority)
        if options.exclusive:
            self._exclusive_count -= 1
        if consumer == self._active:
            self._active = None
        self._elect(newcomer=None)

    def declare(self, single_active: bool) -> None:
        """
        Take the queue's ``x-single-active-consumer`` declaration as made elsewhere
        (the one declaration every node of a cluster shares): the active consumer
        is elected afresh by the rule above when it changes.
        """
        if single_active == self.single_active:
            return
        self.single_active = single_active
        self._active = None
        self._elect(newcomer=None)

    def _candidate(self, consumer: _C) -> bool:
        """Whether a consumer may be the active one: all may on a single-active queue."""
        return self.single_active or self._options[consumer].exclusive

    def _elect(self, newcomer: _C | None) -> None:
        """
        Keep :attr:`active` right: none unless exclusive; else the current one, unless a
        newcomer outranks it, or the highest-priority earliest candidate when there is none.
        """
        if not self.is_exclusive:
            self._active = None
            return
        if self._active is not None:
            if newcomer is not None and self._candidate(newcomer):
                if self._options[newcomer].priority > self._options[self._active].priority:
                    self._active = newcomer
            return
        best: _C | None = None
        for consumer, options in self._options.items():
            if self._candidate(consumer) and (
                best is None or options.priority > self._options[best].priority
            ):
                best = consumer
        self._active = best

    def next(self, has_room: Callable[[_C], bool]) -> _C | None:
        """
        Pick the consumer for the next message, and move the round-robin on.

        :param has_room: whether a consumer may take a message now.
        :returns: the active consumer if it has room, while exclusive; otherwise the
            next consumer with room in turn within the highest priority that has one;
            ``None`` if the message must wait.
        """
        if self.is_exclusive:
            active = self._active
            return active if active is not None and has_room(active) else None
        for priority in self._descending:
            priority_class = self._classes[priority]
            members = priority_class.members
            count = len(members)
            index = priority_class.turn if priority_class.turn < count else 0
            for _ in range(count):
                consumer = members[index]
                index = index + 1 if index + 1 < count else 0
                if has_room(consumer):
                    priority_class.turn = index
                    return consumer
        return None
