"""
What an application's backend does to a user on every node at once: close its
connections and end its detached sessions (``disconnect``), or end its
subscriptions to one destination (``unsubscribe``) (docs/backend.md, "Acting
on a user").

:class:`UserActions` applies an action to this node's connections and resumable
sessions, and tells the engine, which hands it to every other node sharing its
state (:meth:`~stompbroker.broker.engine.cluster_interface.ISharedEngine.share_user_actions`);
each node applies what the others tell it the same way.  An action is
idempotent, so that a node told twice (or told of its own) changes nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from stompbroker.logs import logger
from stompbroker.protocol.errors import ClosedByOperator

__all__ = ["DISCONNECT", "UNSUBSCRIBE", "UserActions"]

log = logger("stompbroker.broker.clients.user_actions")

#: Close every connection of the user, end its detached sessions; argument: the reason.
DISCONNECT = "disconnect"
#: End the user's subscriptions to a destination; argument: ``DESTINATION\nREASON``.
UNSUBSCRIBE = "unsubscribe"

#: ``tell(action, login, argument)``: hands an action to the other nodes.
Tell = Callable[[str, str, str], None]


def _nothing(action: str, login: str, argument: str) -> None:
    """No other node to tell."""


class UserActions:
    """
    A user's sessions, acted on here and on every other node.

    :param connections: returns this node's open connections
        (:class:`~stompbroker.interfaces.IConnection`).
    :param resumption: returns the broker's
        :class:`~stompbroker.protocol.resume.resume_book.ResumeBook`, or ``None``.
    """

    def __init__(
        self, connections: Callable[[], Iterable[Any]], resumption: Callable[[], Any]
    ) -> None:
        self._connections = connections
        self._resumption = resumption
        #: Hands an action to the other nodes: the engine's, once shared.
        self.tell: Tell = _nothing

    def disconnect(self, login: str, reason: str) -> None:
        """Close ``login``'s connections and end its detached sessions, on every node."""
        self.tell(DISCONNECT, login, reason)
        self._disconnect(login, reason)

    def unsubscribe(self, login: str, destination: str, reason: str) -> int:
        """
        End ``login``'s subscriptions to ``destination``, on every node.

        :returns: how many this node ended.
        """
        self.tell(UNSUBSCRIBE, login, f"{destination}\n{reason}")
        return self._unsubscribe(login, destination, reason)

    def apply(self, action: str, login: str, argument: str) -> None:
        """Apply what another node was asked to do to every node (an unknown action: logged)."""
        if action == DISCONNECT:
            self._disconnect(login, argument)
        elif action == UNSUBSCRIBE:
            destination, _, reason = argument.partition("\n")
            self._unsubscribe(login, destination, reason)
        else:
            log.warn("ignored an unknown user action {action!r}", action=action)

    def _mine(self, login: str) -> list[Any]:
        return [
            connection
            for connection in list(self._connections())
            if connection.describe().user == login
        ]

    def _disconnect(self, login: str, reason: str) -> None:
        for connection in self._mine(login):
            connection.fail(ClosedByOperator(reason))
        book = self._resumption()
        if book is not None:
            for record in list(book.sessions()):
                if record.login == login:
                    book.end(record.session)

    def _unsubscribe(self, login: str, destination: str, reason: str) -> int:
        ended = 0
        for connection in self._mine(login):
            for subscription in list(connection.subscribers()):
                if subscription.destination == destination and connection.end_subscription(
                    subscription.subscription_id, reason
                ):
                    ended += 1
        return ended
