"""
The settings of a listener's sessions: limits, heart-beats, authentication and
access, and what becomes of a client that does not read fast enough.

One :class:`SessionConfig` is shared by every session of a listener, and given
by ``twistd`` options (:mod:`stompbroker.app.tap`) or by an embedding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import field, frozen
from attrs.validators import in_

from stompbroker.protocol.frames import SUPPORTED_VERSIONS

#: What happens when a slow client's buffer of topic messages is full
#: (:mod:`stompbroker.protocol.slow_consumer`).
BLOCK = "block"
DROP_OLDEST = "drop-oldest"
DISCONNECT = "disconnect"
SLOW_CONSUMER_POLICIES = (BLOCK, DROP_OLDEST, DISCONNECT)

#: The rights the session checks, with ``SessionConfig.access`` (see
#: :mod:`stompbroker.security.access`).
READ = "read"
WRITE = "write"


@frozen
class SessionConfig:
    """
    Per-connection settings, shared by all sessions of one listener.

    :ivar server_name: sent as CONNECTED's ``server`` header.
    :ivar versions: the protocol versions offered, best first.
    :ivar heartbeat: whether the server heart-beats, ``(send, receive)`` in ms: 0
        in a direction means never; otherwise that direction runs at the client's
        pace (:func:`~stompbroker.protocol.negotiation.negotiate_heartbeat`).
    :ivar heartbeat_min: the shortest intervals applied, ``(send, receive)`` in
        ms: a client asking for beats more often gets them this often, and is
        expected to beat this often.
    :ivar heartbeat_grace: a client is dead once silent for this many times the
        negotiated receive interval.
    :ivar max_frame_size: largest frame accepted, in bytes, headers and body.
    :ivar max_headers: most headers in one frame.
    :ivar max_header_length: longest header line, in bytes.
    :ivar max_held_bytes: most bytes of frames (headers and bodies) a session
        holds unhandled while a frame that must wait for every earlier store
        write (BEGIN, COMMIT, DISCONNECT) waits; past it, the session reads
        nothing more from the client until the store has caught up.
    :ivar max_pending_writes: most store writes (persistent SENDs, COMMITs,
        ACKs of stored messages) one connection may have pending; at it, the
        session reads nothing more from the client until one is done
        (:mod:`~stompbroker.protocol.write_window`).
    :ivar max_pending_write_bytes: most bytes of SEND bodies one connection may
        have pending in the store; the same.
    :ivar authenticator: called with CONNECT's ``login``, ``passcode`` and the
        client's address (and ``certificate=``, the client's verified TLS
        certificate, for a CONNECT with neither, see
        :mod:`stompbroker.protocol.login`; and ``vhost=``, the virtual host's
        name, for a CONNECT to one other than the default ``/``); returns a Deferred of the
        client's identity (with a ``name``, whether it is ``anonymous``, and
        when its credentials ``expires``, as
        :class:`stompbroker.security.identity.Identity`), which fails with
        :class:`~stompbroker.protocol.errors.LoginFailed` for a refused login
        (:class:`stompbroker.security.portal.Authenticator`).  ``None`` lets every
        client in without an identity.
    :ivar access: checks rights, ``check(identity, right, destination)`` raising
        :class:`~stompbroker.protocol.errors.AccessDenied`
        (:class:`stompbroker.security.access_file.AccessControl`); ``None`` allows everything.
        It needs an ``authenticator``, which gives the identities it checks.
    :ivar max_subscriptions: most subscriptions one connection may have; 0 means
        no limit.
    :ivar connect_timeout: seconds a client has, from the moment it connects,
        to complete its CONNECT (login included); 0 means for ever.
    :ivar frame_timeout: seconds a client has to complete a frame once its first
        byte has arrived; 0 means for ever.
    :ivar slow_consumer_policy: what happens when ``auto``-ack topic messages for a
        client that does not read fast enough fill ``slow_consumer_buffer``:
        ``block`` the publishers, ``drop-oldest`` messages, or ``disconnect`` it.
    :ivar slow_consumer_buffer: bytes of topic messages kept for a client whose
        socket cannot take them yet; as many bytes of other frames (receipts,
        queue messages) may wait too before the session stops reading from it.
    :ivar write_grace: bytes still written straight to a transport whose buffer
        is full before its client counts as behind.  One reactor turn of
        fan-out can put about 100 KiB on every subscriber (a 64 KiB read of
        small SENDs becomes bigger MESSAGE frames), more than Twisted's 64 KiB
        mark; without a grace, a third of the deliveries of a busy fan-out took
        the slow path, for clients that kept up (measured).
    :ivar resumption: the broker's
        :class:`~stompbroker.protocol.resume.resume_book.ResumeBook`, shared by every
        listener, which makes sessions resumable for clients that ask
        (:mod:`~stompbroker.protocol.resume.part`); ``None`` turns resumption off.
    """

    server_name: str = "stompbroker"
    versions: tuple[str, ...] = SUPPORTED_VERSIONS
    heartbeat: tuple[int, int] = (10000, 10000)
    heartbeat_min: tuple[int, int] = (1000, 1000)
    heartbeat_grace: float = 2.0
    max_frame_size: int = 100 * 1024 * 1024
    max_headers: int = 1000
    max_header_length: int = 10240
    max_held_bytes: int = 32 * 1024 * 1024
    max_pending_writes: int = 1000
    max_pending_write_bytes: int = 16 * 1024 * 1024
    authenticator: Callable[[str | None, str | None, str], Any] | None = None
    access: Any = field(default=None)
    max_subscriptions: int = 1000
    connect_timeout: float = 10.0
    frame_timeout: float = 60.0
    slow_consumer_policy: str = field(default=DISCONNECT, validator=in_(SLOW_CONSUMER_POLICIES))
    slow_consumer_buffer: int = 8 * 1024 * 1024
    write_grace: int = 256 * 1024
    resumption: Any = None

    @access.validator
    def _access_needs_identities(self, attribute: Any, value: Any) -> None:
        if value is not None and self.authenticator is None:
            raise ValueError(
                "access rules need an authenticator to give identities; one over a"
                " portal without checkers lets everyone in anonymously"
            )
