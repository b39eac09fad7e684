"""
Resuming a session on another node of a cluster: what the nodes tell each
other, and the pure helpers both ends use.  Sans I/O: the
:class:`~stompbroker.interfaces.IResumeDirectory` of the engine moves these
records between nodes; :mod:`~stompbroker.protocol.resume.part` and
:class:`~stompbroker.protocol.resume.resume_book.ResumeBook` use them.

Theory of operation (docs/cluster.md, "Resuming a session on another node"):

- The node that keeps a resumable session files a small :class:`SessionRecord`
  (login, protocol version, the subscriptions' SUBSCRIBE headers) under the
  :func:`token_key` of its token (a hash: the token itself never leaves the
  node), when it issues the token, when the session detaches, and once a
  second when its subscriptions have changed (:func:`signature`).  Missed
  messages stay in that node's memory, as on one node: a cluster pays for a
  resume when it happens, not for each message an absent client misses.
- A node that gets a token takes the record (:class:`Taken`), so that no other
  node can; when the keeping node is another live one, it subscribes again
  to the topics first (holding what they get), then asks that node to hand
  the session over: the :class:`Handover` carries the frames the client missed
  and the subscriptions' latest headers (streams' offsets).  The held frames
  that the handover carries too are written once (:func:`frame_identity`).
"""

from __future__ import annotations

import hashlib
from typing import Any

from attrs import define, field, frozen

#: What a client names as the last message it got: (subscription id or None, message-id).
Last = tuple[str | None, str]


def token_key(token: str) -> str:
    """
    :returns: the name under which a session's record is filed in the cluster:
        the SHA-256 of its token, in hex.  A token is a secret like a password,
        and a record's key is seen by every node and by whoever reads the server.
    """
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@frozen
class SessionRecord:
    """
    What any node needs to resume a session: who it belongs to, the version its
    frames are encoded in, and the headers to subscribe again with.

    :ivar login: the session's login (``""`` without authentication).
    :ivar version: its STOMP version.
    :ivar subscriptions: the SUBSCRIBE headers, in the order the client subscribed.
    """

    login: str
    version: str
    subscriptions: tuple[dict[str, str], ...]


@frozen
class Taken:
    """
    A session's record, taken from the cluster by the node a client resumes on.

    :ivar record: the record.
    :ivar here: whether this node keeps the session (a resume on its own node).
    :ivar alive: whether the node that keeps it is alive: it then holds what
        the client missed, and hands it over; a dead node's is lost.
    :ivar node: the node that keeps it.
    """

    record: SessionRecord
    here: bool
    alive: bool
    node: str


@frozen
class Handover:
    """
    What the node that kept a session gives the node it resumes on.

    :ivar subscriptions: the subscriptions' headers now (a stream
        subscription's offset is the last it delivered).
    :ivar frames: the MESSAGE frames the client has not had, oldest first.
    :ivar gap: whether frames it should have had were dropped.
    """

    subscriptions: tuple[dict[str, str], ...]
    frames: tuple[bytes, ...]
    gap: bool


def signature(subscriptions: dict[str, object]) -> tuple[tuple[str, object, object], ...]:
    """
    :param subscriptions: a session's subscriptions, by id.
    :returns: what changes when its record must be filed again: which
        subscriptions it has (by id, and by the number the session gave each,
        which a new subscription of the same id does not share), and each
        stream subscription's last offset.
    """
    return tuple(
        (
            subscription_id,
            getattr(subscription, "number", None),
            getattr(subscription, "last_stream_offset", None),
        )
        for subscription_id, subscription in subscriptions.items()
    )


def subscription_id(headers: dict[str, str]) -> str | None:
    """:returns: the id a SUBSCRIBE's headers make (STOMP 1.0: the destination without one)."""
    return headers.get("id", headers.get("destination"))


def frame_identity(data: bytes) -> tuple[bytes | None, bytes | None]:
    """
    :param data: an encoded MESSAGE frame.
    :returns: its ``subscription`` and ``message-id`` headers, still encoded
        (``None`` when absent): one message on one subscription.  Message ids
        are unique in a cluster (they start with the node's token), so the same
        pair is the same delivery whichever node encoded it.  A resume reads
        every handed-over frame with it: a few finds, no split.
    """
    end = data.find(b"\n\n")
    if end < 0:
        end = len(data)
    return _header(data, b"\nsubscription:", end), _header(data, b"\nmessage-id:", end)


def _header(data: bytes, key: bytes, end: int) -> bytes | None:
    """:returns: the first value of header ``key`` (``\\nNAME:``) before ``end``, or ``None``."""
    start = data.find(key, 0, end)
    if start < 0:
        return None
    start += len(key)
    stop = data.find(b"\n", start, end + 1)
    if stop < 0:
        stop = end
    return data[start:stop].rstrip(b"\r")


@define(eq=False)
class Elsewhere:
    """
    A session resumed from another node (or from the record a dead one left):
    what :meth:`~stompbroker.protocol.resume.part.Resume._resume_elsewhere` makes of it.

    :ivar subscriptions: the headers to subscribe again with, in order.
    :ivar frames: the frames the client missed, to write first.
    :ivar gap: whether some it should have had are lost.
    :ivar made: the subscriptions made already (the topics', before the
        handover), by id, and what each got meanwhile.
    """

    subscriptions: tuple[dict[str, str], ...]
    frames: tuple[bytes, ...] = ()
    gap: bool = True
    made: dict[str, tuple[Any, list[bytes]]] = field(factory=dict)
