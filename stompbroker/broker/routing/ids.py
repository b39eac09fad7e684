"""
Broker-unique names: message ids, session ids, and the names of reply queues.

Each is a random *node* token, drawn once per broker, and a counter of its
kind, so that two brokers (or two runs of one) never hand out the same name,
and neither do several broker processes that share one engine.  Counting is
cheap enough for the SEND path, which reads :attr:`Ids.node` and
:attr:`Ids.message_ids` itself rather than call :meth:`Ids.new_message_id`.
"""

from __future__ import annotations

import itertools
import secrets

from stompbroker.broker.routing.destinations import REPLY_QUEUE_PREFIX


class Ids:
    """
    The names one broker gives out.

    :param node: the token in every name; a random one by default.
    :ivar node: that token.
    :ivar message_ids: the counter of message ids (``NODE-N``).
    """

    __slots__ = ("node", "message_ids", "_session_ids", "_reply_queue_ids")

    def __init__(self, node: str | None = None) -> None:
        self.node = node if node is not None else secrets.token_hex(4)
        self.message_ids = itertools.count(1)
        self._session_ids = itertools.count(1)
        self._reply_queue_ids = itertools.count(1)

    def new_message_id(self) -> str:
        """:returns: a fresh ``message-id``."""
        return f"{self.node}-{next(self.message_ids)}"

    def new_session_id(self) -> str:
        """:returns: a fresh ``session`` for a CONNECTED frame."""
        return f"session-{self.node}-{next(self._session_ids)}"

    def new_reply_queue(self) -> str:
        """:returns: a fresh ``/reply-queue/`` destination for a temporary queue."""
        return f"{REPLY_QUEUE_PREFIX}tmp-{self.node}-{next(self._reply_queue_ids)}"
