"""
Selectors wired into routing: which subscriptions take which messages.

A SUBSCRIBE's ``selector`` header is compiled once, when the broker takes the
subscription (:func:`subscription_selector`); a bad one is an ERROR naming the
column and what was expected there.  Where the check then runs:

- **Topics.** A subscription with a selector sits in the topic tree behind a
  :class:`SelectingSubscriber`, which tests each message and passes on those
  selected.  Subscriptions without one sit in the tree as before: fan-out costs
  them nothing more.  (The check lives here, in the broker, rather than in the
  session's subscription, because the selector package is the broker's and the
  protocol layer may not import it.)  The tree counts a selecting subscriber as
  it counts a queue, among those that count their own deliveries (see
  :mod:`stompbroker.broker.flow.traffic`), since only it knows how many it passed on.
- **Queues.** The consumer keeps the selector (``Consumer.selector``) and the
  queue's dispatch skips, for that consumer, the messages it does not select
  (:mod:`stompbroker.broker.queueing.dispatch`).

Selectors on durable subscriptions are refused: the durable subscription
outlives the SUBSCRIBE that would carry the selector, and the store does not
keep one.
"""

from __future__ import annotations

from typing import Any

from stompbroker.broker.features.selectors import Selector, compile_selector, message_properties
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.protocol.errors import InvalidSelector
from stompbroker.protocol.message import Message

#: The SUBSCRIBE header that carries a selector (ActiveMQ, Artemis, Apollo).
SELECTOR_HEADER = "selector"


def subscription_selector(subscriber: Any) -> Selector | None:
    """
    Compile the selector of a SUBSCRIBE, if it has one.

    :param subscriber: the :class:`~stompbroker.interfaces.ISubscriber`; its
        ``headers`` are the SUBSCRIBE's.
    :returns: the compiled selector, or ``None`` for none (an empty or blank
        ``selector`` header selects everything, as ActiveMQ takes it).
    :raises InvalidSelector: for a selector that does not compile, and for one on
        a durable subscription.
    """
    text = subscriber.headers.get(SELECTOR_HEADER)
    if text is None or not text.strip():
        return None
    if subscriber.durable is not None:
        raise InvalidSelector(
            "selectors on durable subscriptions are not supported",
            "subscribe to the durable subscription without a selector, or use a"
            " non-durable subscription with one",
        )
    return compile_selector(text)


class SelectingSubscriber:
    """
    Stands in the topic tree for a subscription with a selector.

    :param subscriber: what selected messages go to: the session's subscription,
        or the subscription's own queue (client acknowledgement).
    :param selector: the compiled selector.
    :param traffic: the counters to count deliveries in, for a subscription
        delivered to directly; ``None`` when ``subscriber`` is a queue, which
        counts its own.
    """

    __slots__ = ("subscriber", "selector", "_matches", "_traffic")

    def __init__(self, subscriber: Any, selector: Selector, traffic: Traffic | None) -> None:
        self.subscriber = subscriber
        self.selector = selector
        self._matches = selector.matches
        self._traffic = traffic

    def __repr__(self) -> str:
        return f"<SelectingSubscriber {self.selector.text!r} for {self.subscriber!r}>"

    def deliver(self, message: Message) -> None:
        """Pass ``message`` on if the selector selects it, counting the delivery."""
        if not self._matches(message_properties(message)):
            return
        self.subscriber.deliver(message)
        traffic = self._traffic
        if traffic is not None:
            traffic.delivered(message, True)
            self.subscriber.count_deliveries(
                1, {style: len(tail) for style, tail in message.wire.items()}
            )

    def count_deliveries(self, count: int, tails: dict[str, int]) -> None:
        """Nothing to count: each delivery was counted as it was made."""
