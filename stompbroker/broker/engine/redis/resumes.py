"""
Resumable sessions across the nodes of a Redis cluster: the
:class:`~stompbroker.interfaces.IResumeDirectory` of the redis engine
(docs/cluster.md, "Resuming a session on another node").

- **Records**: each node keeps the
  :class:`~stompbroker.protocol.resume.session_records.SessionRecord` of its resumable
  sessions in the hash ``PREFIX:resume:NODE``, a field per session named by
  the SHA-256 of its token, its value JSON.  The node refreshes the hash's
  expiry once a second to the resume window, so that the records of a node
  that died vanish a window after it; the set ``PREFIX:resume:nodes`` lists
  the hashes, for a node that looks a token up.
- **Taking**: one Lua script (:data:`TAKE`) finds the record in the nodes'
  hashes, checks its login and version, deletes it and says whether its node
  is alive (its liveness key is there): two nodes cannot both take it.
- **Handing over**: the resuming node asks the keeping node on that node's
  channel ``PREFIX:resume:to:NODE`` (the connection that also brings it every
  topic message, so that the request comes after every message published
  before it); the keeping node puts what the client missed in a key of its
  own (``SET ... PX``: a resume buffer may be larger than a pub/sub message
  should be) and says so on the asker's channel, which takes it (``GETDEL``).
  The asker waits at most :data:`HANDOVER_TIMEOUT` seconds (less with a
  shorter ``--node-timeout``).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from twisted.internet.defer import Deferred
from zope.interface import implementer

from stompbroker.broker.engine.redis.connection import run
from stompbroker.broker.engine.redis.scripts import load, run_script
from stompbroker.interfaces import IResumeDirectory
from stompbroker.logs import logger
from stompbroker.protocol.resume.session_records import Handover, Last, SessionRecord, Taken

log = logger("stompbroker.broker.engine.redis.resumes")

#: The longest a resuming node waits for the node that keeps the session.
HANDOVER_TIMEOUT = 2.0
#: How long a handover waits in Redis for the node that asked.
HANDOVER_TTL_MS = 30_000

#: lua/take_session.lua (what it takes and answers is said there).
TAKE = load("take_session")

#: The first byte of a message on a node's resume channel.
_REQUEST = b"?"
_REPLY = b"!"


def encode_record(record: SessionRecord) -> str:
    """:returns: a record as JSON (the Lua script reads its login and version)."""
    return json.dumps(
        {
            "login": record.login,
            "version": record.version,
            "subscriptions": list(record.subscriptions),
        },
        separators=(",", ":"),
    )


def decode_record(payload: bytes | str) -> SessionRecord:
    """:returns: the record :func:`encode_record` wrote."""
    data = json.loads(payload)
    return SessionRecord(
        str(data["login"]),
        str(data["version"]),
        tuple({str(k): str(v) for k, v in headers.items()} for headers in data["subscriptions"]),
    )


def encode_handover(handover: Handover | None) -> bytes:
    """:returns: a handover as a JSON line (sizes of the frames) and the frames after it."""
    if handover is None:
        return b'{"known":false}\n'
    head = {
        "known": True,
        "gap": handover.gap,
        "subscriptions": list(handover.subscriptions),
        "sizes": [len(data) for data in handover.frames],
    }
    return json.dumps(head, separators=(",", ":")).encode() + b"\n" + b"".join(handover.frames)


def decode_handover(payload: bytes) -> Handover | None:
    """
    :returns: the handover :func:`encode_handover` wrote, or ``None``.
    :raises ValueError: for a payload it did not write.
    """
    line, _, rest = payload.partition(b"\n")
    head = json.loads(line)
    if not head.get("known"):
        return None
    frames = []
    position = 0
    for size in head["sizes"]:
        frames.append(rest[position : position + size])
        position += size
    if position != len(rest):
        raise ValueError("a handover's frames do not add up to its sizes")
    subscriptions = tuple(
        {str(k): str(v) for k, v in headers.items()} for headers in head["subscriptions"]
    )
    return Handover(subscriptions, tuple(frames), bool(head["gap"]))


@implementer(IResumeDirectory)
class RedisResumeDirectory:
    """
    This node's resumable sessions in Redis, and the other nodes' as it needs them.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :param book: this node's :class:`~stompbroker.protocol.resume.resume_book.ResumeBook`.
    """

    def __init__(self, engine: Any, book: Any) -> None:
        self._engine = engine
        self._book = book
        names = engine.names
        self._node: str = engine.ids.node
        self._hashes = names.resume_nodes
        self._hash_prefix = names.sessions("")
        self._hash = self._hash_prefix + self._node
        self._channel_prefix: str = names.resume_channel("")
        self._handover_prefix = names.handover("")
        self._alive_prefix = names.alive("")
        self._ttl_ms = int(book.window * 1000) + 1000
        self.timeout = min(HANDOVER_TIMEOUT, engine.node_timeout)
        self._requests = itertools.count(1)
        #: request id -> (the Deferred of its handover, its timeout).
        self._waiting: dict[str, tuple[Deferred[Handover | None], Any]] = {}
        book.directory = self

    @property
    def channel(self) -> str:
        """This node's resume channel: requests from the others, and their replies."""
        return self._channel_prefix + self._node

    # -- this node's records ----------------------------------------------------------

    def available(self) -> bool:
        """:returns: whether Redis was reachable at the last write."""
        return bool(self._engine.writer.connected)

    def file(self, key: str, record: SessionRecord) -> None:
        """Keep a record of one of this node's sessions (one ``HSET``, nobody waits)."""
        self._engine.writer.command("HSET", self._hash, key, encode_record(record))

    def drop(self, key: str) -> None:
        """Forget a record of this node's (one ``HDEL``)."""
        self._engine.writer.command("HDEL", self._hash, key)

    def tick(self) -> None:
        """
        Once a second: file the records whose subscriptions changed, and keep
        this node's hash for a window past now.
        """
        self._book.refresh()
        writer = self._engine.writer
        writer.command("SADD", self._hashes, self._node)
        writer.command("PEXPIRE", self._hash, self._ttl_ms)

    # -- resuming here a session of another node --------------------------------------

    def take(self, key: str, login: str, version: str) -> Deferred[Taken | None]:
        """Take a record (:data:`TAKE`): see :meth:`IResumeDirectory.take`."""
        return run(self._engine.loop, self._taken(key, login, version))

    async def _taken(self, key: str, login: str, version: str) -> Taken | None:
        reply = await run_script(
            self._engine.client,
            TAKE,
            1,
            self._hashes,
            key,
            login,
            version,
            self._hash_prefix,
            self._alive_prefix,
        )
        if not reply:
            return None
        node = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
        return Taken(decode_record(reply[1]), node == self._node, bool(int(reply[2])), node)

    def hand_over(self, node: str, key: str, last: Last | None) -> Deferred[Handover | None]:
        """Ask ``node`` for a session: see :meth:`IResumeDirectory.hand_over`."""
        request = f"{self._node}-{next(self._requests)}"
        # Cancelled when the client goes meanwhile: nobody waits any more.
        answer: Deferred[Handover | None] = Deferred(lambda _: self._forget(request))
        timer = self._engine.clock.callLater(self.timeout, self._timed_out, request)
        self._waiting[request] = (answer, timer)
        payload = json.dumps(
            {"id": request, "from": self._node, "key": key, "last": last},
            separators=(",", ":"),
        ).encode()
        # Through the writer, after every topic message this node published before.
        self._engine.writer.command("PUBLISH", self._channel_prefix + node, _REQUEST + payload)
        return answer

    def _forget(self, request: str) -> None:
        waiting = self._waiting.pop(request, None)
        if waiting is not None and waiting[1].active():
            waiting[1].cancel()

    def _timed_out(self, request: str) -> None:
        waiting = self._waiting.pop(request, None)
        if waiting is not None:
            log.warn("no handover of a resumed session in {timeout} s", timeout=self.timeout)
            waiting[0].callback(None)

    def received(self, payload: bytes) -> None:
        """A message on this node's resume channel: a request, or a reply to ours."""
        try:
            if payload.startswith(_REQUEST):
                self._requested(json.loads(payload[1:]))
            elif payload.startswith(_REPLY):
                request = payload[1:].decode()
                if request in self._waiting:
                    fetched = run(self._engine.loop, self._fetch(request))
                    fetched.addErrback(self._fetch_failed, request)
        except (ValueError, KeyError, TypeError):
            log.failure("a resume message from another node was not understood")

    def _requested(self, request: dict[str, Any]) -> None:
        """Another node resumes one of this node's sessions: hand it over."""
        last = request.get("last")
        handover = self._book.hand_over(
            str(request["key"]), None if last is None else (last[0], str(last[1]))
        )
        writer = self._engine.writer
        writer.command(
            "SET",
            self._handover_prefix + str(request["id"]),
            encode_handover(handover),
            "PX",
            HANDOVER_TTL_MS,
        )
        writer.command(
            "PUBLISH",
            self._channel_prefix + str(request["from"]),
            _REPLY + str(request["id"]).encode(),
        )

    async def _fetch(self, request: str) -> None:
        payload = await self._engine.client.getdel(self._handover_prefix + request)
        waiting = self._waiting.pop(request, None)
        if waiting is None:
            return
        answer, timer = waiting
        if timer.active():
            timer.cancel()
        handover = None
        try:
            handover = None if payload is None else decode_handover(payload)
        except (ValueError, KeyError, TypeError):
            log.failure("a handed-over session was not understood")
        answer.callback(handover)

    def _fetch_failed(self, failure: Any, request: str) -> None:
        log.failure("taking a handed-over session failed", failure)
        waiting = self._waiting.pop(request, None)
        if waiting is not None:
            if waiting[1].active():
                waiting[1].cancel()
            waiting[0].callback(None)

    def close(self) -> None:
        """The node stops: nobody waits any more."""
        waiting, self._waiting = self._waiting, {}
        for answer, timer in waiting.values():
            if timer.active():
                timer.cancel()
            answer.callback(None)
