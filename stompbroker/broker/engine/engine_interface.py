"""
What the broker asks of an engine (:class:`IEngine`), and of the queues an engine
hands out (:class:`IQueue`, in :mod:`stompbroker.broker.engine.queue_interface`
and re-exported here); what an engine does for the other processes sharing its
state is :mod:`stompbroker.broker.engine.cluster_interface`'s.

The broker's router, consumers and connection registry reach destinations only
through these; :class:`~stompbroker.broker.engine.local.LocalEngine` implements
them in this process.  Each method says how an engine that keeps the state in a
shared Redis server would do it, so that several broker processes act as one:

- topics: Redis pub/sub, one channel per destination; each process keeps its own
  subscribers in its topic tree (:mod:`~stompbroker.broker.engine.fanout`) and (p)subscribes to the
  channels they need, and fans what arrives out to them;
- streams (``/stream/``): a Redis stream each, appended by a script that also
  publishes each entry to every process, read from any offset with ``XRANGE``;
- queues and durable subscriptions: Redis Streams with one
  consumer group per queue, so that every process's consumers compete for one
  stream, each message read by one of them (``XREADGROUP``), settled with
  ``XACK``, and claimed back (``XAUTOCLAIM``) from a process that died;
- delivery, whatever the engine, only to this process's subscribers, through
  :class:`~stompbroker.interfaces.ISubscriber`.

The rule for results: a method that a remote engine would have to wait on the
server for says so, and may return a Deferred; the local engine returns
``None`` (or the value itself) on every path a message takes, so that its hot
paths cost nothing for the remote case.  A method called per message never
raises, logs or waits; what the broker must tell a client about (the storing of
a persistent message, the durable settling of an ACK) comes back as a Deferred
that the session holds the RECEIPT on.
"""

from __future__ import annotations

from attrs import frozen

from stompbroker.broker.engine.cluster_interface import ISharedEngine
from stompbroker.broker.engine.queue_interface import IQueue
from stompbroker.broker.store.base import StoreError

__all__ = ["EngineUnavailable", "IEngine", "IQueue", "Node"]


class EngineUnavailable(StoreError):
    """
    An engine cannot start (a remote engine's server is unreachable, refuses the
    login, or is too old; the reactor cannot run its client): the message says
    what to do.  A :class:`~stompbroker.broker.store.base.StoreError`, so that a
    broker refuses to start on it as on a store it cannot use.
    """


@frozen
class Node:
    """
    One broker process sharing an engine.

    :ivar name: its node token (:attr:`~stompbroker.broker.routing.ids.Ids.node`), in
        every message id and session id it gives out.
    :ivar here: whether it is the process answering.
    :ivar engine: the engine's kind, ``local`` or ``redis``.
    """

    name: str
    here: bool
    engine: str


class IEngine(ISharedEngine):
    """
    Where destinations' state lives: topic subscriptions, queues, durable
    subscriptions and persistent messages.

    The broker builds one engine per process and calls it from the reactor
    thread only.  Queues are :class:`IQueue`; subscribers are
    :class:`~stompbroker.interfaces.ISubscriber` objects of this process.  What
    an engine does for the other processes that share its state (the nodes,
    their figures, resumption, presence, the server's outages) is
    :class:`~stompbroker.broker.engine.cluster_interface.ISharedEngine`'s,
    which this extends.
    """

    # -- what it is

    def capabilities():  # type: ignore[no-untyped-def]
        """
        :returns: the :class:`~stompbroker.broker.engine.capabilities.Capabilities`
            it supports, the same every time; the router and the consumers refuse
            what it lacks through
            :func:`~stompbroker.broker.engine.capabilities.require`, and never
            call a method for a feature it lacks (:meth:`scheduling`,
            :meth:`retaining`).
        """

    def bookkeeping():  # type: ignore[no-untyped-def]
        """
        :returns: this process's
            :class:`~stompbroker.broker.engine.fanout.Bookkeeping`: its ids (whose
            node token keeps names of processes sharing a server apart), its
            per-destination traffic and its delivery counters; a remote engine
            counts what passes through this process.
        """

    def duplicate_detection():  # type: ignore[no-untyped-def]
        """
        :returns: the
            :class:`~stompbroker.broker.engine.duplicate_detection.RoutesOnce`
            that routes a SEND with a duplicate-detection id unless its
            destination saw the id within its window (the local engine's
            windows are in the process; the redis engine's in Redis, shared by
            every node).
        """

    # -- life cycle

    def open():  # type: ignore[no-untyped-def]
        """
        Make ready what can fail at once, so that the broker does not start on it.

        Local: open the store.  Redis: check the configuration and start connecting
        (a refused connection is reported by :meth:`recover`).

        :raises stompbroker.broker.store.base.StoreError: if the store cannot be used.
        """

    def recover():  # type: ignore[no-untyped-def]
        """
        Rebuild what outlives a restart: queues and durable subscriptions with the
        messages they held.

        Local: read the store back (:mod:`stompbroker.broker.store.recovery`).  Redis:
        wait for the connection, load the registry of durable subscriptions (a
        hash of key -> pattern) into its durable subscriptions, and claim
        the pending entries of consumers of this node that died
        (``XAUTOCLAIM``); the messages stay in the server.

        :returns: a Deferred that fires once clients may be let in, or fails with
            what stopped it.
        """

    def stop(drained):  # type: ignore[no-untyped-def]
        """
        The broker is stopping: keep what its connections do until ``drained``
        fires (they are all closed), then release the engine's resources.

        Local: close the store after its last writes.  Redis: wait for the writes
        in flight, unsubscribe, disconnect.

        :returns: a Deferred that fires when that is done.
        """

    # -- routing (per message: no raising, no logging, no waiting)

    def publish_topic(message):  # type: ignore[no-untyped-def]
        """
        Deliver a message sent to a topic to every subscription it matches now,
        counting it in; one that has expired already is expired, not delivered.

        Local: match the tree, call each subscriber's ``deliver``, synchronously.
        Redis: check expiry here, ``PUBLISH`` to the destination's channel without
        waiting, and fan out to local subscribers when the message comes back
        from the channel, in every process alike (so that each process's
        subscribers see one order); a subscription's queue (client acks,
        durable) takes it from its stream instead, which :meth:`keep` or the
        publish wrote.

        :returns: ``None``.
        """

    def publish_queue(message):  # type: ignore[no-untyped-def]
        """
        Put a message sent to a ``/queue/`` on that queue, made on first use.

        Local: the queue's ``publish``, which hands it to a consumer with room at
        once.  Redis: ``XADD`` to the queue's stream without waiting (for a
        persistent message :meth:`keep` has done it already).

        :returns: ``None``; or a Deferred the SEND's RECEIPT waits for, which
            fails with ``LimitExceeded`` when the queue refuses the message
            (Redis: a policy's ``reject-publish`` on the shared stream).
        """

    def publish_reply(message):  # type: ignore[no-untyped-def]
        """
        Put a message sent to a ``/reply-queue/`` on that temporary queue, or drop
        it (counted) if its connection has gone.

        Redis: the reply queue may be another process's: ``XADD`` to its stream
        if the registry of live reply queues has it (a key with the owning
        connection's lifetime), else drop.

        :returns: ``None``.
        """

    def publish_stream(message):  # type: ignore[no-untyped-def]
        """
        Append a message sent to a ``/stream/`` to that stream (made on first
        use), giving it the next offset, and hand it to the readers at the tail.

        Local: the stream's log, and the store's stream tables.  Redis: a script
        that runs ``XADD`` and ``PUBLISH`` of the entry to every process, and trims;
        readers everywhere get it from the channel.

        :returns: ``None`` if it is kept once the call returns; else a Deferred
            that fires once it is durable (the SEND's RECEIPT waits on it), or
            fails with what to tell the client.
        """

    def stream_reader(destination, start):  # type: ignore[no-untyped-def]
        """
        :param start: a :class:`~stompbroker.broker.streams.offsets.StreamStart`.
        :returns: a :class:`~stompbroker.broker.streams.reader.StreamReader` on
            ``destination``'s stream at ``start``, which stands for a queue to the
            subscription's :class:`~stompbroker.broker.queueing.delivery.Consumer`.
        """

    def keep(message):  # type: ignore[no-untyped-def]
        """
        File a persistent message under every key that keeps it (its queue, or the
        durable subscriptions its topic matches), before it is routed.

        Local: the journal's adds, in store order before any delivery mark.
        Redis: ``XADD`` to the queue's stream (or to each matching durable
        subscription's stream, in one ``MULTI``), with ``WAIT``/AOF as configured
        for durability; routing then only wakes local readers.

        :returns: ``None`` if nothing keeps it; else a Deferred that fires once it
            is durable, or fails with
            :class:`~stompbroker.broker.store.journal.MessageNotStored`.
        """

    # -- queues

    def queue(destination):  # type: ignore[no-untyped-def]
        """
        :returns: the :class:`IQueue` of a ``/queue/`` destination, made on first use.

        Redis: a handle on the stream, made at once; the consumer group is created
        (``XGROUP CREATE ... MKSTREAM``) in the background, and reading starts
        once it exists.
        """

    def new_reply_queue():  # type: ignore[no-untyped-def]
        """
        :returns: a new temporary :class:`IQueue` under a broker-unique
            ``/reply-queue/`` name (:meth:`~stompbroker.broker.routing.ids.Ids.new_reply_queue`).

        Redis: register the name with this process's liveness, so other processes
        can reply to it.
        """

    def local_queue(destination):  # type: ignore[no-untyped-def]
        """
        :returns: a new :class:`IQueue` of this process, registered nowhere, named
            ``destination``: what a subscription's own queue behind a user
            destination (:mod:`stompbroker.broker.features.user_destinations`) is.
            Both engines alike: the messages have come to this process already.
        """

    def delete_queue(queue):  # type: ignore[no-untyped-def]
        """
        Delete a queue of :meth:`queues_here` and what it holds (a temporary queue ends
        with its connection).  Redis: ``DEL`` its stream and registration, without
        waiting.
        """

    def release_queue(queue):  # type: ignore[no-untyped-def]
        """
        A consumer has left ``queue``: forget it if it is an idle ``/queue/``, as
        queues are made on first use.  Redis: drop the local handle only; the
        stream stays for other processes.
        """

    def watch_queues(pattern, watcher):  # type: ignore[no-untyped-def]
        """
        Attach a wildcard consumer (:mod:`stompbroker.broker.queueing.wildcard`) to
        every ``/queue/`` that ``pattern`` matches, now and as each is made
        (``watcher.attach(queue)``), until :meth:`unwatch_queues`.  Called only
        when :meth:`capabilities` states ``queue_wildcards``.

        Redis: the queues every node knows of, as a set of names in Redis that
        each node adds to, watched for new names.
        """

    def unwatch_queues(watcher):  # type: ignore[no-untyped-def]
        """Attach ``watcher`` to no more queues; unknown ones are ignored."""

    def depth(destination):  # type: ignore[no-untyped-def]
        """
        :returns: how many messages wait in a queue's destination for a consumer:
            an ``int`` locally; a Deferred firing with it from a remote engine
            (``XLEN`` less the entries the group has read), so statistics that
            read it must accept either.
        """

    # -- topic subscriptions

    def add_subscriber(pattern, subscriber, selector=None):  # type: ignore[no-untyped-def]
        """
        Deliver what topics matching ``pattern`` get to a direct subscriber
        (``auto`` acknowledgement, no durable name); with a ``selector``, only
        what it selects (local fan-out puts a
        :class:`~stompbroker.broker.features.selecting.SelectingSubscriber` in the tree;
        a remote engine does the same in its local tree).

        Redis: add it to the local tree, and ``(P)SUBSCRIBE`` the pattern's
        channel(s) if it is the pattern's first local subscriber.

        :returns: ``None``, or a Deferred that fires once messages from other
            processes will reach it (the server confirmed the subscription).
        """

    def remove_subscriber(pattern, subscriber):  # type: ignore[no-untyped-def]
        """
        Undo :meth:`add_subscriber`; an unknown subscriber is ignored.  Redis:
        ``(P)UNSUBSCRIBE`` after the pattern's last local subscriber, without waiting.
        """

    def subscription_queue(pattern, selector=None):  # type: ignore[no-untyped-def]
        """
        :returns: a new :class:`IQueue` that collects what topics matching
            ``pattern`` get (only what ``selector`` selects, if given), for one
            non-durable subscription with client acknowledgement.

        Redis: a local queue fed by the local fan-out, as the local engine's (it
        ends with its subscription, so it needs no stream).
        """

    def remove_subscription_queue(queue):  # type: ignore[no-untyped-def]
        """Delete a queue of :meth:`subscription_queue` and what it holds."""

    def durable_queue(durable, pattern):  # type: ignore[no-untyped-def]
        """
        Find or make the queue of a durable subscription; one subscribed again on
        another pattern starts afresh, unless it is being consumed.

        Redis: a stream per durable subscription with one consumer group, its
        pattern in the registry of durable subscriptions (so that every process's
        :meth:`keep` and fan-out write what matches into it); made in the
        background, the handle returned at once.

        :param durable: ``(client-id, name)``.
        :returns: its :class:`IQueue`.
        :raises stompbroker.protocol.errors.DuplicateSubscription: if it is being
            consumed on another pattern.
        """

    def waiting(queue):  # type: ignore[no-untyped-def]
        """
        What waits in ``queue`` for a consumer: a queue browser's copies, the
        management API's browse.

        Local: the queue's pending messages.  Redis: for a ``/queue/``, what
        its stream holds that no live node has handed to a consumer, asked of
        the nodes that read it (:mod:`~stompbroker.broker.engine.redis.control`).

        :returns: a :class:`~stompbroker.broker.features.browsing.Waiting`, or
            a Deferred firing with one.
        """

    def transfer(queue, count, route, copy):  # type: ignore[no-untyped-def]
        """
        Move (or copy) the first ``count`` messages waiting in ``queue`` elsewhere:
        the management API's move, copy and dead-letter retry.

        Each message goes as a new message (a new ``message-id``) to the
        destination ``route`` names, with the headers it gives: to a ``/queue/``
        as a SEND there would (counted in), to a ``/topic/`` through the fan-out.
        A persistent message stays persistent: moved to a queue, it leaves its key
        for the new one in one store step (the journal's ``move``, as a dead
        letter does); copied, it is added; moved to a topic, it is filed under the
        matching durable subscriptions' keys and removed from its own.  A message
        ``route`` leaves (``None``) stays where it is.

        Redis: ``XRANGE`` the unread entries, then per message ``XADD`` to the
        target stream (or ``PUBLISH``) and, for a move, ``XDEL`` from the source,
        in one ``MULTI``.  Local: what memory holds, then a paged queue's part
        on disk, read and moved a batch per reactor turn
        (:mod:`~stompbroker.broker.engine.queue_transfer`).

        :param queue: an :class:`IQueue` of this engine.
        :param count: most messages to take from its head.
        :param route: ``message -> (destination, headers)`` or ``None``; the
            destination is a ``/queue/`` or ``/topic/`` one, checked by the caller.
        :param copy: leave the originals in place.
        :returns: a :class:`~stompbroker.broker.engine.queue_transfer.Transferred`
            (how many went, how many it looked at), or a Deferred firing with one.
        """

    def shared_queues():  # type: ignore[no-untyped-def]
        """
        The management's browse, purge, move, copy and dead-letter retry of a
        ``/queue/`` whose messages several processes hold.

        Local: ``None`` (the queue handles' own ``browse``, ``purge`` and
        :meth:`transfer` see every message, at once).  Redis: an object with
        ``exists(destination)``, ``browse(destination, count)`` (a Deferred
        :class:`~stompbroker.broker.features.browsing.Waiting`), ``purge(destination)``
        and ``transfer(destination, count, route, copy)`` (Deferred
        :class:`~stompbroker.broker.engine.shared_queues.Acted`) that act on what
        waits in the stream and what every node has read ahead
        (:mod:`~stompbroker.broker.engine.redis.queue_actions`).
        """

    def find_queue(destination):  # type: ignore[no-untyped-def]
        """
        :returns: the :class:`IQueue` this process holds for a ``/queue/`` or
            ``/reply-queue/`` destination, or ``None``; never makes one.
        """

    def queues_here():  # type: ignore[no-untyped-def]
        """
        :returns: ``(destination, queue)`` of every ``/queue/`` and
            ``/reply-queue/`` this process holds an :class:`IQueue` for (Redis: a
            handle; what no node reads lives in :meth:`cluster`'s view).
        """

    def find_durable(durable):  # type: ignore[no-untyped-def]
        """:returns: the :class:`IQueue` of a durable subscription known here, or ``None``."""

    def durables_here():  # type: ignore[no-untyped-def]
        """:returns: ``(durable, queue)`` of every durable subscription known here."""

    def topic_subscriptions(destination):  # type: ignore[no-untyped-def]
        """
        :returns: the :class:`~stompbroker.broker.engine.fanout.TopicSubscriptions`
            of this process that a message sent to ``destination`` reaches now.
        """

    def report_deliveries(pattern=None):  # type: ignore[no-untyped-def]
        """
        Tell this process's direct topic subscribers what they were sent since
        they were last told (only on destinations ``pattern`` matches, if given):
        statistics read them after this.
        """

    def stream_logs():  # type: ignore[no-untyped-def]
        """
        :returns: the ``/stream/`` destinations known here -> their
            :class:`~stompbroker.broker.streams.log.StreamLog` (a remote engine's
            mirror those it reads).
        """

    # -- destination features (only when capabilities() has them)

    def scheduling(fire):  # type: ignore[no-untyped-def]
        """
        :param fire: called with each scheduled message when it is due.
        :returns: the :class:`~stompbroker.broker.features.schedule_timer.Scheduling`
            of the messages held for later delivery (``capabilities().scheduling``).
        """

    def retaining():  # type: ignore[no-untyped-def]
        """
        :returns: the :class:`~stompbroker.broker.features.retaining.Retaining`
            that ``retain`` acts on (``capabilities().retain``).
        """

    def retained_copies(pattern, selector):  # type: ignore[no-untyped-def]
        """
        :returns: the retained messages a new subscription to ``pattern`` gets
            first (only what ``selector`` selects, if given); none without
            ``capabilities().retain``.
        """

    def remove_durable(durable):  # type: ignore[no-untyped-def]
        """
        Delete a durable subscription and the messages it has collected.

        Redis: remove it from the registry and ``DEL`` its stream, in one ``MULTI``.

        :returns: ``None``, or a Deferred that fires once the removal is durable;
            it never fails (a failure is logged).
        :raises stompbroker.protocol.errors.UnknownSubscription: if there is none.
        """
