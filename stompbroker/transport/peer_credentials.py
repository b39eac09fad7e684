"""
What a connection tells about its client's credentials, below STOMP: a TLS
client certificate, and a WebSocket's ``Authorization: Bearer`` token.

Each adapter holds a :class:`PeerCredentials` and hands it to the session with
the connection (:class:`~stompbroker.transport.session_link.SessionLink`), which
reads it when it handles CONNECT (:mod:`stompbroker.protocol.login`): the bearer token
stands in for a missing ``passcode``, and the certificate is offered when the
CONNECT has neither ``login`` nor ``passcode``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attrs import frozen

__all__ = ["PeerCredentials", "bearer_token"]


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """
    :param headers: an HTTP request's headers, by lower-case name.
    :returns: the token of an ``Authorization: Bearer TOKEN`` header (RFC 6750,
        2.1; the scheme's case does not matter), or ``None``.
    """
    scheme, _, token = headers.get("authorization", "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


@frozen
class PeerCredentials:
    """
    What a connection tells the session about the client's credentials.

    :ivar transport: the Twisted transport, asked for the TLS client certificate
        when the session wants it (the handshake may not be over when the
        connection is made).
    :ivar bearer_token: the token of the WebSocket handshake's ``Authorization:
        Bearer`` header; ``None`` on TCP, and for handshakes without one.
    """

    transport: Any
    bearer_token: str | None = None

    def peer_certificate(self) -> Any:
        """
        :returns: the certificate the client presented in its TLS handshake (a
            pyOpenSSL ``X509``), which the listener verified if it asks for one
            (``mtls:``); ``None`` without TLS, or without a certificate.
        """
        get_certificate = getattr(self.transport, "getPeerCertificate", None)
        if get_certificate is None:
            return None
        return get_certificate()
