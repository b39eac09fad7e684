"""
What an engine does for the other broker processes (nodes) that share its state
(:class:`ISharedEngine`): which nodes there are, the figures each shares for
statistics of the whole cluster, resumption and presence across nodes, the
server's outages, and the topic messages a node missed.

:class:`~stompbroker.broker.engine.engine_interface.IEngine` extends it, so every engine
provides it; an engine of one process (the local one) answers each call with
itself alone, or nothing.
"""

from __future__ import annotations

from zope.interface import Interface

__all__ = ["ISharedEngine"]


class ISharedEngine(Interface):
    """
    An engine's part in a cluster: what it tells the other nodes sharing its
    state, and what it reads of theirs.  Called from the reactor thread only.
    """

    def nodes():  # type: ignore[no-untyped-def]
        """
        The broker processes that share this engine's state, for ``GET /api/nodes``.

        Local: this one.  Redis: every node whose liveness key is in the server.

        :returns: a list of :class:`~stompbroker.broker.engine.engine_interface.Node` (or a
            Deferred firing with one).
        """

    def share(figures):  # type: ignore[no-untyped-def]
        """
        Share this node's figures with the other nodes of the cluster, for
        statistics that show the whole cluster (:mod:`stompbroker.broker.engine.node_figures`).

        Local: nothing (one process is the whole broker).  Redis: call
        ``figures`` about once a second and keep what it returns in a key that
        expires with the node.

        :param figures: returns this node's
            :class:`~stompbroker.broker.engine.node_figures.NodeFigures`, encoded.
        """

    def share_resumption(book):  # type: ignore[no-untyped-def]
        """
        Let a client of a resumable session resume on any process sharing this
        engine's state (docs/resume.md).

        Local: nothing (sessions resume on this process).  Redis: set ``book``'s
        ``directory`` to an :class:`~stompbroker.interfaces.IResumeDirectory`
        that files its sessions' records in the server and hands sessions over
        between nodes.

        :param book: the broker's :class:`~stompbroker.protocol.resume.resume_book.ResumeBook`.
        """

    def share_presence(presence):  # type: ignore[no-untyped-def]
        """
        Share who subscribes to what with every process sharing this engine's
        state (docs/destinations.md, "Presence").  Called once, before the
        engine opens.

        Local: nothing.  Redis: set ``presence.share`` to a part that files this
        node's subscriptions in the server and tells the other nodes of each
        join and leave, and apply theirs to ``presence``.

        :param presence: the broker's :class:`~stompbroker.broker.features.presence.Presence`.
        """

    def share_user_actions(apply):  # type: ignore[no-untyped-def]
        """
        Let a backend's action on a user (close its sessions, end its
        subscriptions to a destination) reach every process sharing this
        engine's state (docs/backend.md).  Called once, before the engine opens.

        Local: nothing to tell.  Redis: apply the other nodes' actions with
        ``apply(action, login, argument)``, and tell them this node's.

        :returns: ``tell(action, login, argument)``, which hands this node's
            action to the others.
        """

    def report_outages(alarm):  # type: ignore[no-untyped-def]
        """
        Pause publishers while the engine's server is away, rather than refuse
        their messages (called once, before the engine opens).

        Local: nothing (its store is in this process).  Redis: ``alarm_on`` while
        Redis is away, up to ``--engine-outage-hold``, ``alarm_off`` once it is
        back or the hold has run out; and what its writer holds meanwhile is
        counted in the memory in use (``count_held``).

        :param alarm: the broker's :class:`~stompbroker.broker.flow.backpressure.BackPressure`.
        """

    def topic_gaps():  # type: ignore[no-untyped-def]
        """
        :returns: a :class:`~stompbroker.broker.engine.node_figures.TopicGaps`: how
            often this node missed other nodes' topic messages and how many
            subscriptions it told; ``None`` for an engine of one process, which
            misses none.
        """

    def cluster():  # type: ignore[no-untyped-def]
        """
        :returns: the latest :class:`~stompbroker.broker.engine.node_figures.ClusterView`
            (the other live nodes' figures, and what waits in the server
            unread), read about once a second; ``None`` for an engine of one
            process.  Never waits.
        """
