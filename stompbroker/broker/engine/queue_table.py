"""
The queues this process holds, by destination: a part both engines are
assembled from.

:class:`QueueTable` makes local queues
(:class:`~stompbroker.broker.queueing.queues.WorkerQueue`) for temporary queues,
topic subscriptions and dead letters alike, and a ``/queue/`` destination's
queue through the engine's own maker: a local queue on the local engine, a
handle on a shared stream on the redis engine.  It also moves messages out of a
queue for the management API (:meth:`QueueTable.transfer`), which acts on what
waits in this process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.engine.fanout import Bookkeeping, TopicFanout
from stompbroker.broker.engine.policy_binding import PolicyBinding
from stompbroker.broker.engine.queue_transfer import QueueTransfer, Transferred
from stompbroker.broker.features.policies import Policies
from stompbroker.broker.queueing.dead_letters import DeadLetters
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.broker.routing.destinations import QUEUE_PREFIX, TOPIC_PREFIX
from stompbroker.broker.routing.syntax import matches
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

__all__ = ["QueueTable", "bind_local_parts"]


def _ignore(failure: Any) -> None:
    """Swallow a failure that has been logged where it happened."""


class QueueTable:
    """
    ``/queue/`` and ``/reply-queue/`` destinations -> the queues this process holds.

    :param clock: times the queues' work.
    :param policy: how messages are delivered, redelivered, dead-lettered, expired.
    :param books: the process's :class:`~stompbroker.broker.engine.fanout.Bookkeeping`.
    :param journal: the :class:`~stompbroker.broker.store.journal.Journal`, or ``None``.
    :param shared: makes the queue of a ``/queue/`` destination; by default a
        local queue whose persistent messages the journal keeps.
    :param policies: the per-destination policies, or ``None`` for none ever.
    :param paging: the :class:`~stompbroker.broker.queueing.paging.PagingBudget`
        the store's queues page by, or ``None``.

    :ivar queues: destination -> queue.
    :ivar durable: ``(client-id, name)`` -> the queue of that durable subscription.
    :ivar dead_letters: where the queues' failed messages go.
    :ivar watchers: wildcard consumer -> its pattern, for the ``/queue/``
        destinations made from now on (:meth:`watch`).
    """

    def __init__(
        self,
        clock: Any,
        policy: DeliveryPolicy,
        books: Bookkeeping,
        journal: Any = None,
        shared: Callable[[str], Any] | None = None,
        policies: Policies | None = None,
        paging: Any = None,
    ) -> None:
        self._clock = clock
        self._paging = paging
        self._policy = policy
        self._books = books
        self.journal = journal
        self._shared = shared if shared is not None else self._local
        self.queues: dict[str, Any] = {}
        self.durable: dict[tuple[str, str], Any] = {}
        self.watchers: dict[Any, str] = {}
        self.dead_letters = DeadLetters(
            policy, books.counters, books.traffic, books.ids, self.queue, journal, policies
        )
        #: Applies the per-destination policies to the queues here, if there are any.
        self.policies = (
            None if policies is None else PolicyBinding(policies, clock, self.queues, self.delete)
        )

    def new_queue(self, destination: str, store_key: str | None = None) -> WorkerQueue:
        """
        Make a local queue, registered nowhere.

        :param destination: its destination, or a topic subscription's pattern.
        :param store_key: its key in the store, if the store keeps its persistent messages.
        """
        journal = self.journal if store_key is not None else None
        return WorkerQueue(
            destination,
            self._clock,
            self._policy,
            self._books.counters,
            self.dead_letters.dead_letter,
            journal=journal,
            store_key=store_key,
            traffic=self._books.traffic,
            paging=self._paging,
        )

    def _local(self, destination: str) -> WorkerQueue:
        return self.new_queue(destination, destination)

    def queue(self, destination: str) -> Any:
        """:returns: the queue of a ``/queue/`` destination, made on first use."""
        queue = self.queues.get(destination)
        if queue is None:
            queue = self.queues[destination] = self._shared(destination)
            if self.policies is not None:
                self.policies.apply(queue)
            if self.watchers:
                self._met(destination, queue)
        return queue

    def watch(self, pattern: str, watcher: Any) -> None:
        """
        Attach a wildcard consumer to every ``/queue/`` held here that ``pattern``
        matches, and to each made from now on, until :meth:`unwatch`.

        :param pattern: a ``/queue/`` pattern with a wildcard.
        :param watcher: a :class:`~stompbroker.broker.queueing.wildcard.WildcardConsumer`
            (its ``attach`` is called with each queue).
        """
        self.watchers[watcher] = pattern
        for destination, queue in list(self.queues.items()):
            if destination.startswith(QUEUE_PREFIX) and matches(pattern, destination):
                watcher.attach(queue)

    def unwatch(self, watcher: Any) -> None:
        """Attach ``watcher`` to no more queues; unknown ones are ignored."""
        self.watchers.pop(watcher, None)

    def _met(self, destination: str, queue: Any) -> None:
        """A queue was made: the wildcard consumers whose pattern matches take from it."""
        if destination.startswith(QUEUE_PREFIX):
            for watcher, pattern in list(self.watchers.items()):
                if matches(pattern, destination):
                    watcher.attach(queue)

    def new_reply_queue(self) -> WorkerQueue:
        """:returns: a new temporary queue, under a broker-unique ``/reply-queue/`` name."""
        name = self._books.ids.new_reply_queue()
        queue = self.queues[name] = self.new_queue(name)
        return queue

    def delete(self, queue: Any) -> None:
        """Delete a queue of :attr:`queues` and what it holds (a temporary queue's end)."""
        del self.queues[queue.destination]
        queue.close()

    def release(self, queue: Any) -> None:
        """Delete ``queue`` if it is a ``/queue/`` that holds nothing and has no consumers."""
        if queue.is_idle() and queue.destination.startswith(QUEUE_PREFIX):
            self.delete(queue)
        elif self.policies is not None and not queue.consumers:
            self.policies.unused(queue)

    def find(self, destination: str) -> Any:
        """:returns: the queue of ``destination`` held here, or ``None``."""
        return self.queues.get(destination)

    def queues_here(self) -> list[tuple[str, Any]]:
        """:returns: ``(destination, queue)`` of every queue held here."""
        return list(self.queues.items())

    def find_durable(self, durable: tuple[str, str]) -> Any:
        """:returns: the queue of a durable subscription known here, or ``None``."""
        return self.durable.get(durable)

    def durables_here(self) -> list[tuple[tuple[str, str], Any]]:
        """:returns: ``(durable, queue)`` of every durable subscription known here."""
        return list(self.durable.items())

    def publish_reply(self, message: Message) -> None:
        """
        Put a message sent to a ``/reply-queue/`` on that temporary queue, or drop
        it if the requester has gone (as RabbitMQ does).
        """
        queue = self.queues.get(message.destination)
        if queue is None:
            books = self._books
            books.counters.discarded += 1
            books.traffic.published(message)
            books.traffic.count((message,), "messages_dropped")
            return
        queue.publish(message)

    def depth(self, destination: str) -> int:
        """:returns: how many messages wait in the queue of ``destination`` (0 for none)."""
        queue = self.queues.get(destination)
        return 0 if queue is None else int(queue.depth())

    def transfer(
        self,
        queue: Any,
        count: int,
        route: Callable[[Message], tuple[str, Headers] | None],
        copy: bool,
        keep: Callable[[Message], Deferred[None] | None],
        publish_topic: Callable[[Message], None],
    ) -> Transferred | Deferred[Transferred]:
        """
        Move (or copy) the first ``count`` pending messages of ``queue`` where
        ``route`` says, as new messages (see
        :meth:`IEngine.transfer <stompbroker.broker.engine.engine_interface.IEngine.transfer>`):
        what memory holds, then a paged queue's part on disk, a batch per
        reactor turn (:class:`~stompbroker.broker.engine.queue_transfer.QueueTransfer`).

        :param keep: the engine's ``keep``, for a persistent message moved to a topic.
        :param publish_topic: the engine's ``publish_topic``.
        :returns: what went, at once if memory held it all (in one batch); else
            a Deferred of it.
        """

        def send(message: Message, destination: str, headers: Headers, copy: bool) -> None:
            self._send_copy(queue, message, destination, headers, copy, keep, publish_topic)

        return QueueTransfer(self._clock, queue, count, route, copy, send).start()

    def _send_copy(
        self,
        queue: Any,
        message: Message,
        destination: str,
        headers: Headers,
        copy: bool,
        keep: Callable[[Message], Deferred[None] | None],
        publish_topic: Callable[[Message], None],
    ) -> None:
        """
        Send one message of ``queue`` to ``destination`` as a new message; a
        persistent one moved to a queue leaves its key for the target's in one
        store step, one moved to a topic is kept for its durable subscriptions
        and then removed (two steps: a crash between them keeps both).
        """
        journal = self.journal
        persistent = message.persistent and journal is not None
        new = Message(
            destination,
            self._books.ids.new_message_id(),
            headers,
            message.body,
            message.expires,
            0,
            persistent,
            message.priority,
            message.group,
            message.closes_group,
        )
        source_key = None if copy or not persistent else queue.store_key
        written = None
        if destination.startswith(TOPIC_PREFIX):
            if persistent:
                written = keep(new)
                if source_key is not None:
                    journal.remove(source_key, message.message_id)
            publish_topic(new)
        else:
            if source_key is not None:
                journal.move(source_key, message.message_id, destination, new)
            elif persistent:
                written = journal.add([destination], new)
            self.queue(destination).publish(new)
        if written is not None:
            # The journal has logged a failure; nobody waits to hear of it.
            written.addErrback(_ignore)


def bind_local_parts(engine: Any, fanout: TopicFanout, table: QueueTable) -> None:
    """
    Give ``engine`` the :class:`~stompbroker.broker.engine.engine_interface.IEngine` methods
    that are its local parts' own, bound once: the same code on both engines,
    and no call through the engine on the way (a topic subscription, a reply
    queue, the management API's look-ups).
    """
    engine.add_subscriber = fanout.add
    engine.remove_subscriber = fanout.remove
    engine.subscription_queue = fanout.subscription_queue
    engine.remove_subscription_queue = fanout.remove_subscription_queue
    engine.topic_subscriptions = fanout.subscriptions
    engine.report_deliveries = fanout.report_deliveries
    engine.new_reply_queue = table.new_reply_queue
    engine.local_queue = table.new_queue
    engine.delete_queue = table.delete
    engine.find_queue = table.find
    engine.watch_queues = table.watch
    engine.unwatch_queues = table.unwatch
    engine.queues_here = table.queues_here
    engine.find_durable = table.find_durable
    engine.durables_here = table.durables_here
