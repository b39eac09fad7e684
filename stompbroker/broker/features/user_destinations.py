"""
User destinations: messages to a user, wherever the user is connected, as
Spring's ``UserDestinationMessageHandler`` maps them.

- A logged-in client SUBSCRIBEs to ``/user/queue/NAME`` (or ``/user/topic/NAME``);
  the broker maps it to the *user key* ``/user/LOGIN/queue/NAME``, with LOGIN
  encoded as one segment (:func:`login_segment`), and gives the subscription a
  queue of its own behind the key.  Anonymous sessions have none.
- A SEND to ``/user/LOGIN/queue/NAME`` (LOGIN percent-encoded where it holds
  ``/``, as Spring's ``%2F``) is routed as a topic message to that key: every
  subscription of that user's sessions to ``/user/queue/NAME`` gets a copy, on
  every node (the redis engine's topic fan-out carries it).
- Each MESSAGE says what the client subscribed to: ``destination:/user/queue/NAME``.

The key goes into the engine's topic tree as one :class:`UserInbox` per key and
process, which makes the copy with the client's destination once per message
and hands it to the queue of each subscription; the tree counts the inbox as a
queue (:mod:`stompbroker.broker.engine.fanout`), since the queues count their
own deliveries.  Nothing here runs for a message to any other destination.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

from attrs import evolve

from stompbroker.broker.routing.syntax import validate_destination
from stompbroker.protocol.errors import InvalidDestination
from stompbroker.protocol.message import NO_TAILS, Message

__all__ = [
    "USER_PREFIX",
    "UserDestinations",
    "UserInbox",
    "login_segment",
    "send_key",
    "send_login",
    "shown_destination",
    "subscription_key",
]

USER_PREFIX = "/user/"
#: What may follow ``/user/`` in a SUBSCRIBE, and the login in a SEND.
FLAVOURS = ("queue/", "topic/")


def login_segment(login: str) -> str:
    """
    :returns: ``login`` as one segment of a user key: percent-encoded, with the
        destination separators (``/`` and ``.``) and the wildcard characters
        encoded too, so that no two logins share a key and none is a pattern.
    """
    return quote(login, safe="").replace(".", "%2E")


def _checked(key: str, destination: str, form: str) -> str:
    """:raises InvalidDestination: unless ``key`` names one destination."""
    try:
        validate_destination(key)
    except InvalidDestination as error:
        raise InvalidDestination(
            "invalid user destination",
            f"{destination!r} is not a user destination: {form}, NAME without wildcards"
            f" or empty segments ({error.detail or error.message})",
        ) from None
    return key


def subscription_key(login: str | None, destination: str) -> str:
    """
    Map a SUBSCRIBE to a user destination onto the subscriber's own key.

    :param login: the subscriber's login, ``None`` for an anonymous session.
    :param destination: ``/user/queue/NAME`` or ``/user/topic/NAME``.
    :returns: ``/user/LOGIN/queue/NAME`` (LOGIN as :func:`login_segment` writes it).
    :raises InvalidDestination: for an anonymous session, or any other form.
    """
    rest = destination[len(USER_PREFIX) :]
    if not rest.startswith(FLAVOURS) or len(rest) <= len("queue/"):
        raise InvalidDestination(
            "invalid user destination",
            f"subscribe to /user/queue/NAME or /user/topic/NAME, not {destination!r};"
            " /user/LOGIN/... is where a SEND goes",
        )
    if login is None:
        raise InvalidDestination(
            "no user destinations for anonymous sessions",
            f"{destination!r} is private to the logged-in user who subscribes to it;"
            " log in (CONNECT with login and passcode, or a token) to subscribe",
        )
    return _checked(
        USER_PREFIX + login_segment(login) + "/" + rest, destination, "/user/queue/NAME"
    )


def send_login(destination: str) -> str:
    """
    :param destination: a SEND's ``/user/LOGIN/...``.
    :returns: the login it addresses, percent-decoded.
    """
    segment = destination[len(USER_PREFIX) :].partition("/")[0]
    return unquote(segment)


def send_key(destination: str) -> str:
    """
    Map a SEND to ``/user/LOGIN/queue/NAME`` (or ``.../topic/NAME``) onto the user key.

    :returns: the key the user's subscriptions are filed under.
    :raises InvalidDestination: for any other form.
    """
    segment, slash, rest = destination[len(USER_PREFIX) :].partition("/")
    if not segment or not slash or not rest.startswith(FLAVOURS) or len(rest) <= len("queue/"):
        raise InvalidDestination(
            "invalid user destination",
            f"send to /user/LOGIN/queue/NAME or /user/LOGIN/topic/NAME, not {destination!r}",
        )
    key = USER_PREFIX + login_segment(unquote(segment)) + "/" + rest
    return _checked(key, destination, "/user/LOGIN/queue/NAME")


def shown_destination(key: str) -> str:
    """:returns: what the subscriber subscribed to: ``/user/queue/NAME`` for its key."""
    return USER_PREFIX + key.split("/", 3)[3]


class UserInbox:
    """
    What stands in a process's topic tree for one user key: a copy of each
    message under the destination its subscribers subscribed to, to each of
    their queues.

    :ivar key: the user key.
    :ivar queues: the queue of each subscription of this process to it.
    """

    __slots__ = ("key", "shown", "queues")

    def __init__(self, key: str) -> None:
        self.key = key
        self.shown = shown_destination(key)
        self.queues: list[Any] = []

    def deliver(self, message: Message) -> None:
        """Hand a copy under the subscribers' destination to each subscription's queue."""
        copy = evolve(message, destination=self.shown, wire=NO_TAILS)
        for queue in self.queues:
            queue.deliver(copy)

    def count_deliveries(self, count: int, tails: dict[str, int]) -> None:
        """Nothing to count: the queues count their own deliveries."""

    def mark_gap(self) -> int:
        """Tell every subscription of each queue of a gap; :returns: how many were told."""
        return sum(queue.mark_gap() for queue in self.queues)

    def __repr__(self) -> str:
        return f"<UserInbox {self.key!r} ({len(self.queues)} subscriptions)>"


class UserDestinations:
    """
    This process's subscriptions to user destinations: a queue each, behind
    the :class:`UserInbox` of its key in the engine's topic tree.

    :param engine: the :class:`~stompbroker.broker.engine.engine_interface.IEngine`: its
        topic tree (``add_subscriber``, ``remove_subscriber``) and its local queues
        (``local_queue``).
    """

    __slots__ = ("_engine", "_inboxes", "_by_queue")

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        #: key -> its inbox in the tree.
        self._inboxes: dict[str, UserInbox] = {}
        #: a subscription's queue -> the inbox that feeds it.
        self._by_queue: dict[Any, UserInbox] = {}

    def attach(self, subscriber: Any) -> Any:
        """
        :param subscriber: a subscription to ``/user/queue/NAME`` or ``/user/topic/NAME``.
        :returns: a new queue of its own that gets what is sent to its user's key.
        :raises InvalidDestination: for an anonymous session, or a bad destination.
        """
        login = subscriber.connection.describe().user
        key = subscription_key(login, subscriber.destination)
        inbox = self._inboxes.get(key)
        if inbox is None:
            inbox = self._inboxes[key] = UserInbox(key)
            self._engine.add_subscriber(key, inbox)
        queue = self._engine.local_queue(subscriber.destination)
        inbox.queues.append(queue)
        self._by_queue[queue] = inbox
        return queue

    def detach(self, queue: Any) -> None:
        """Delete a queue of :meth:`attach`; a key's last one takes its inbox out of the tree."""
        inbox = self._by_queue.pop(queue, None)
        if inbox is None:
            return
        inbox.queues.remove(queue)
        queue.close()
        if not inbox.queues:
            del self._inboxes[inbox.key]
            self._engine.remove_subscriber(inbox.key, inbox)

    def keys(self) -> list[str]:
        """:returns: the user keys this process has subscriptions to."""
        return list(self._inboxes)
