"""
Retained messages wired in: a SEND's ``retain`` applied, its persistent copy in
the message store, and the copies a new topic subscription receives first.

The rules (the headers, what the copy carries, wildcard matching) are
:mod:`stompbroker.broker.features.retain_rules`; the engine holds the
:class:`~stompbroker.broker.features.retain_rules.RetainedMessages`.  The router calls
:meth:`Retaining.apply` before it routes a SEND with ``retain`` (so a refusal,
such as too many retained topics, loses nothing and routes nothing); the
consumers call :func:`retained_copies` when a topic subscription starts, and
deliver those copies before the subscription joins the topic tree.

A persistent retained message (``persistent:true``, with a store) is kept in the
store under its topic, and comes back at start (:mod:`stompbroker.broker.store.recovery`); a
non-persistent one that replaces it, or a ``retain:remove``, removes that copy.
"""

from __future__ import annotations

from typing import Any

from attrs import evolve
from twisted.internet.defer import Deferred

from stompbroker.broker.features.retain_rules import SET, RetainedMessages, as_retained
from stompbroker.broker.features.selectors import Selector, message_properties
from stompbroker.protocol.message import Message

__all__ = ["Retaining", "retained_copies"]


class Retaining:
    """
    What a ``retain`` SEND does to the engine's retained messages and the store.

    :param retained: the engine's
        :class:`~stompbroker.broker.features.retain_rules.RetainedMessages`.
    :param journal: the engine's :class:`~stompbroker.broker.store.journal.Journal`,
        or ``None`` if nothing keeps persistent messages.
    """

    __slots__ = ("_retained", "_journal")

    def __init__(self, retained: RetainedMessages, journal: Any) -> None:
        self._retained = retained
        self._journal = journal

    def apply(self, action: str, message: Message) -> Deferred[None] | None:
        """
        Keep ``message`` as its topic's last value
        (:data:`~stompbroker.broker.features.retain_rules.SET`),
        or forget the topic's (:data:`~stompbroker.broker.features.retain_rules.REMOVE`).

        :returns: for a persistent message kept in the store, the Deferred of
            that write, which the SEND's RECEIPT waits on; otherwise ``None``.
        :raises LimitExceeded: if too many topics retain a message already.
        """
        retained = self._retained
        journal = self._journal
        if action is SET:
            previous = retained.get(message.destination)
            retained.set(message)
            if journal is None:
                return None
            if (
                previous is not None
                and previous.persistent
                and not (message.persistent and previous.destination == message.destination)
            ):
                journal.unretain(previous.destination)
            if message.persistent:
                written: Deferred[None] = journal.retain(message.destination, message)
                return written
            return None
        removed = retained.remove(message.destination)
        if removed is not None and removed.persistent and journal is not None:
            journal.unretain(removed.destination)
        return None


def retained_copies(
    retained: RetainedMessages, pattern: str, selector: Selector | None, now: float
) -> list[Message]:
    """
    What a new subscription to ``pattern`` receives before anything else.

    :param selector: the subscription's selector: a retained message it does not
        select is not delivered, as a published one would not be.
    :param now: the clock's time: expired messages are not delivered.
    :returns: ``retained:true`` copies, oldest retained first; never persistent,
        so that settling one touches no store.
    """
    copies = []
    for message in retained.matching(pattern, now):
        copy = evolve(as_retained(message), persistent=False)
        if selector is None or selector.matches(message_properties(copy)):
            copies.append(copy)
    return copies
