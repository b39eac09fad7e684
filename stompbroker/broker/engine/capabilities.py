"""
What an engine supports: one :class:`Capabilities` value each engine states
(:meth:`IEngine.capabilities <stompbroker.broker.engine.engine_interface.IEngine.capabilities>`),
and the one function, :func:`require`, that turns a feature an engine lacks
into the ERROR a client gets.

The router and the consumers consult the value only through :func:`require`
(and decide what to build from it once, when they are made), so an engine
gains a feature by stating it here and adding the code behind it: nothing
else refuses it.  The texts are the ones docs/cluster.md and the tests quote.
"""

from __future__ import annotations

from attrs import fields, frozen

from stompbroker.protocol.errors import NotSupported

__all__ = ["LOCAL", "REDIS", "Capabilities", "refusal", "require"]


@frozen
class Capabilities:
    """
    The destination features an engine supports.

    :ivar persistence: it keeps persistent messages (a message store, or a
        server that persists); without, ``persistent`` headers are ignored.
    :ivar selectors_on_queues: a ``selector`` on a ``/queue/`` subscription.
    :ivar message_groups: ``JMSXGroupID`` on a message sent to a ``/queue/``.
    :ivar priority_order: waiting messages leave a queue by priority.  Not
        refused where missing: a priority is a hint (as in JMS), and a queue
        without it delivers in arrival order.
    :ivar scheduling: ``AMQ_SCHEDULED_DELAY`` and its companions.
    :ivar retain: the ``retain`` header on a topic SEND.
    :ivar browse: ``browser:true`` on a ``/queue/``.
    :ivar exclusive_consumers: ``activemq.exclusive`` and
        ``x-single-active-consumer`` on a ``/queue/`` subscription.
    :ivar consumer_priority: ``activemq.priority`` and ``x-priority`` on a
        ``/queue/`` subscription.
    :ivar queue_wildcards: a SUBSCRIBE to a ``/queue/`` pattern (``*``, ``#``,
        ``>``): one consumer on every queue it matches, made before or after.
    """

    persistence: bool = True
    selectors_on_queues: bool = True
    message_groups: bool = True
    priority_order: bool = True
    scheduling: bool = True
    retain: bool = True
    browse: bool = True
    exclusive_consumers: bool = True
    consumer_priority: bool = True
    queue_wildcards: bool = True


#: The local engine with a store; without one, ``persistence`` is off.
LOCAL = Capabilities()

#: The redis engine (docs/cluster.md): every destination feature across nodes.
REDIS = Capabilities()

_SHARED = (
    "this broker runs on the redis engine, whose queues are shared by nodes that each"
    " choose among their own consumers only (docs/cluster.md); drop activemq.priority,"
    " x-priority, activemq.exclusive and x-single-active-consumer"
)
_CONSUMER_OPTIONS = (
    "consumer priorities and exclusive consumers are not supported by the redis engine yet",
    _SHARED,
)

#: A refused feature -> the ERROR's ``message`` header and body.
REFUSALS: dict[str, tuple[str, str]] = {
    "selectors_on_queues": (
        "selectors on queues are not supported by the redis engine yet",
        "this broker runs on the redis engine, whose queues take no selector yet"
        " (docs/cluster.md); selectors on topics work",
    ),
    "message_groups": (
        "message groups on queues are not supported by the redis engine yet",
        "this broker runs on the redis engine, whose queues are shared by nodes"
        " that keep no common record of group owners (docs/cluster.md); send"
        " without JMSXGroupID",
    ),
    "scheduling": (
        "scheduled delivery is not supported by this engine",
        "This broker's engine (Redis) does not hold scheduled messages; see docs/cluster.md.",
    ),
    "retain": (
        "retain is not supported by this engine",
        "This broker's engine (Redis) does not keep retained messages; see docs/cluster.md.",
    ),
    "browse": (
        "queue browsers are not supported by the redis engine yet",
        "this broker runs on the redis engine, whose queues are shared by nodes that"
        " each see only what they have read (docs/cluster.md)",
    ),
    "queue_wildcards": (
        "wildcard queue consumers are not supported by the redis engine yet",
        "this broker runs on the redis engine, whose nodes keep no common list of"
        " queues to match a pattern against (docs/cluster.md); subscribe to each"
        " queue by name. Do not re-subscribe to this pattern on reconnecting: it is"
        " refused the same way every time",
    ),
    "exclusive_consumers": _CONSUMER_OPTIONS,
    "consumer_priority": _CONSUMER_OPTIONS,
}

_NAMES = frozenset(field.name for field in fields(Capabilities))
if not set(REFUSALS) <= _NAMES:  # pragma: no cover - a typo in the table above
    raise AssertionError(f"refusals for unknown capabilities: {set(REFUSALS) - _NAMES}")


def require(capabilities: Capabilities, *features: str) -> None:
    """
    Refuse the first of ``features`` that ``capabilities`` lacks.

    :param features: names of :class:`Capabilities` fields that have a refusal.
    :raises NotSupported: with the documented text, for a feature the engine lacks.
    :raises KeyError: for a name that is not a refusable capability.
    """
    for feature in features:
        error = refusal(feature)
        if not getattr(capabilities, feature):
            raise error


def refusal(feature: str) -> NotSupported:
    """
    :returns: the error for ``feature`` refused, for an engine method that the
        broker calls only when :func:`require` let it (an engine states it, and
        cannot be called for it).
    :raises KeyError: for a name that is not a refusable capability.
    """
    return NotSupported(*REFUSALS[feature])
