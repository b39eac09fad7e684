"""
The rules of durable subscriptions that every engine keeps alike: a durable name
subscribed again on another pattern, and the error for a name that does not exist.

Apart from :mod:`stompbroker.broker.engine.local` because the redis engine
(:mod:`stompbroker.broker.engine.redis.durables`) applies the same rules to its
own registry, so that a client sees one behaviour whichever engine runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from stompbroker.protocol.errors import DuplicateSubscription, UnknownSubscription

__all__ = ["reusable_durable", "unknown_durable"]


def reusable_durable(
    queues: Mapping[tuple[str, str], Any],
    durable: tuple[str, str],
    pattern: str,
    remove: Callable[[tuple[str, str]], Any],
) -> Any:
    """
    A durable name subscribed again on another pattern starts afresh, as JMS
    does, unless someone is consuming from it now (on this node).

    :param queues: the durable subscriptions' queues.
    :param remove: deletes a durable subscription.
    :returns: the queue of ``durable`` if it is on ``pattern``; ``None`` if
        there is none (any on another pattern has been removed).
    :raises DuplicateSubscription: if it is being consumed on another pattern.
    """
    queue = queues.get(durable)
    if queue is None or queue.destination == pattern:
        return queue
    if queue.consumers:
        raise DuplicateSubscription(
            "durable subscription in use",
            f"the durable subscription {durable[1]!r} is being consumed on"
            f" {queue.destination!r}; it cannot move to {pattern!r} now",
        )
    remove(durable)
    return None


def unknown_durable(durable: tuple[str, str]) -> UnknownSubscription:
    """:returns: the error for a durable subscription that does not exist."""
    return UnknownSubscription(
        "unknown durable subscription",
        f"there is no durable subscription named {durable[1]!r}"
        + (f" for client-id {durable[0]!r}" if durable[0] else ""),
    )
