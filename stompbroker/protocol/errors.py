"""
Exceptions of the protocol layer.

Each carries a ``message`` short enough for the ``message`` header of an ERROR
frame and a ``detail`` for its body, so the edge that catches it can tell the
client exactly what was wrong without knowing where it was raised.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """
    The peer broke the STOMP protocol; the connection must end with an ERROR frame.

    :param message: a one-line description, used as the ERROR frame's ``message`` header.
    :param detail: a longer explanation for the ERROR frame's body.
    :param receipt_id: the ``receipt`` of the offending frame, if it had one.
    """

    def __init__(self, message: str, detail: str = "", receipt_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail or message
        self.receipt_id = receipt_id


#: The name the style guide uses; the same class.
StompProtocolError = ProtocolError


class MalformedFrame(ProtocolError):
    """The bytes are not a STOMP frame: a bad header line, escape or terminator."""


class FrameTooLarge(ProtocolError):
    """A frame is larger than ``max_frame_size``."""


class TooManyHeaders(ProtocolError):
    """A frame has more headers than ``max_headers``."""


class HeaderTooLong(ProtocolError):
    """A header line is longer than ``max_header_length``."""


class UnknownCommand(ProtocolError):
    """A frame names a command that STOMP does not have."""


class MissingHeader(ProtocolError):
    """A frame lacks a header its command requires (``destination``, ``id``, ...)."""


class UnexpectedFrame(ProtocolError):
    """A valid frame arrived in a state that does not allow it (e.g. SEND before CONNECT)."""


class VersionMismatch(ProtocolError):
    """The client accepts no version we speak."""


class NotSupported(ProtocolError):
    """A frame asks for something the broker does not do."""


class InvalidDestination(ProtocolError):
    """A destination is not one the broker serves, or has a wildcard where none is allowed."""


class DuplicateSubscription(ProtocolError):
    """A SUBSCRIBE reuses an ``id`` (or, in 1.0, a destination) the connection already has."""


class UnknownSubscription(ProtocolError):
    """An UNSUBSCRIBE, ACK or NACK names a subscription the connection does not have."""


class LimitExceeded(ProtocolError):
    """A configured limit (connections, subscriptions, ...) would be exceeded."""


class ShuttingDown(ProtocolError):
    """The broker is stopping: every connection gets this ERROR, then a close."""


class ClosedByOperator(ProtocolError):
    """
    An operator closed this connection through the management API: the client
    gets this ERROR, then a close, as with :class:`ShuttingDown`.
    """

    def __init__(self, reason: str = "") -> None:
        detail = "an operator closed this connection"
        super().__init__("closed by an operator", f"{detail}: {reason}" if reason else detail)


class LoginFailed(ProtocolError):
    """
    CONNECT's ``login`` and ``passcode`` were not accepted.

    The ERROR says that and nothing more: whether the user exists, or which
    check refused it, would help a guesser.
    """

    def __init__(self, receipt_id: str | None = None) -> None:
        super().__init__("login failed", receipt_id=receipt_id)


class AccessDenied(ProtocolError):
    """
    The client may not use a destination this way: its identity lacks a right there.

    :param right: the missing right, ``read``, ``write`` or ``admin``.
    :param destination: the destination or subscription pattern, as the client sent it.
    :param detail: who was refused and why, for the ERROR body.
    """

    def __init__(
        self, right: str, destination: str, detail: str = "", receipt_id: str | None = None
    ) -> None:
        shown = destination if len(destination) <= 80 else destination[:80] + "..."
        super().__init__(f"access denied: no {right} right on {shown!r}", detail, receipt_id)
        self.right = right
        self.destination = destination


class AuthorizationUnavailable(AccessDenied):
    """
    The application that decides rights (``--auth http:URL``) gave no answer:
    it timed out, failed or answered nonsense, so the frame is refused.

    :param right: the right that was asked about.
    :param destination: the destination or subscription pattern, as the client sent it.
    :param detail: what went wrong with the application's endpoint, for the ERROR body.
    """

    def __init__(
        self, right: str, destination: str, detail: str = "", receipt_id: str | None = None
    ) -> None:
        super().__init__(right, destination, detail, receipt_id)
        shown = destination if len(destination) <= 80 else destination[:80] + "..."
        self.message = f"authorization unavailable: {right} on {shown!r}"
        self.args = (self.message,)


class AuthorizationPending(Exception):
    """
    Not a client's fault: an access check needs an answer it does not have yet
    (the application's, over HTTP).  The session holds the frame, and the
    frames after it, and handles them again once ``answer`` fires.

    :param answer: a Deferred (this layer never names Twisted) that fires,
        never fails, once the answer is known.
    """

    def __init__(self, answer: object) -> None:
        super().__init__("authorization pending")
        self.answer = answer


class UnknownAck(ProtocolError):
    """An ACK or NACK names a message that is not awaiting acknowledgement on this connection."""


class UnknownTransaction(ProtocolError):
    """A frame names a transaction that is not open on this connection."""


class DuplicateTransaction(ProtocolError):
    """A BEGIN names a transaction that is already open on this connection."""


class InvalidSelector(ProtocolError):
    """
    A SUBSCRIBE's ``selector`` is not a message selector the broker understands.

    :param message: where and what went wrong, for the ERROR frame's ``message`` header.
    :param detail: the selector with a caret under the fault, for the ERROR body.
    :param column: the 1-based column of the fault in the selector.
    :param expected: what would have been accepted there, in words.
    """

    def __init__(
        self,
        message: str,
        detail: str = "",
        column: int = 0,
        expected: tuple[str, ...] = (),
        receipt_id: str | None = None,
    ) -> None:
        super().__init__(message, detail, receipt_id)
        self.column = column
        self.expected = expected


class InvalidStreamOffset(ProtocolError):
    """A stream SUBSCRIBE's ``x-stream-offset`` is not one of the values it may take."""
