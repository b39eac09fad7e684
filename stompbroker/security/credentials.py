"""
The kinds of credentials a STOMP client can present, besides a user name and password.

A CONNECT carries ``login`` and ``passcode``; the connection beneath it may carry
more.  This module names each kind as ``twisted.cred`` wants it (an interface that
checkers declare, and a credentials object the portal hands them), and
:func:`connect_credentials` picks which one a CONNECT presents:

- **a client certificate** (:class:`ClientCertificate`), when the CONNECT has
  neither ``login`` nor ``passcode`` and the TLS listener verified a certificate
  from the client, and a checker of certificates (``--auth cert``) is configured;
- **a user name and password**, when ``login`` is given; a token checker reads a
  bearer token from the password, whatever the login;
- **a bearer token** (:class:`BearerToken`), when ``login`` is empty but
  ``passcode`` is not, and a token checker (``--auth jwt:...``) is configured:
  OAuth 2 clients often have no user name to give;
- **nothing** (anonymous access) otherwise, as before tokens existed.

A password or a token also carries the client's address (``address``, the host
part of the session's peer, which a PROXY header gives behind a load balancer),
for checkers that ask someone else about the login (``--auth http:URL`` tells
the application); the others ignore it.

A checker that refuses credentials for a reason the client may be told (an
expired token, a certificate without a common name) raises
:class:`InvalidCredentials`, which the portal turns into an ERROR naming that
reason.  Password checkers never do: whether a user exists stays unsaid.

Imports only Twisted and zope, so that the portal and the checkers can all
import it.
"""

from __future__ import annotations

from typing import Any

from attrs import field, frozen
from twisted.cred.credentials import Anonymous, UsernamePassword
from twisted.cred.error import UnauthorizedLogin
from zope.interface import Attribute, Interface, implementer

__all__ = [
    "BearerToken",
    "ClientCertificate",
    "ClientPassword",
    "IBearerToken",
    "ICertificate",
    "InvalidCredentials",
    "connect_credentials",
]


class IBearerToken(Interface):
    """
    A bearer token sent without a user name.

    Like ``IUsernamePassword``, it holds the token as ``password`` (and an empty
    ``username``), so that a token checker reads a token the same way whether
    the client gave a login or not.  It does not extend ``IUsernamePassword``,
    so that the portal never hands it to a password checker.
    """

    password = Attribute("The token.")
    username = Attribute("Always empty.")


@implementer(IBearerToken)
@frozen
class BearerToken:
    """
    A token a client sent as CONNECT's ``passcode`` with no ``login``.

    :ivar password: the token.
    """

    password: str = field(repr=False)
    username: str = ""
    address: str = ""


class ClientPassword(UsernamePassword):
    """
    CONNECT's ``login`` and ``passcode``, with the client's address.

    Twisted's ``UsernamePassword`` (which password checkers compare against)
    plus ``address``; a subclass, because strcred's checkers test for that class's
    interface and call its ``checkPassword``.
    """

    def __init__(self, username: str, password: str, address: str = "") -> None:
        # Text, not bytes as Twisted's annotations say (see connect_credentials).
        super().__init__(username, password)  # type: ignore[arg-type]
        self.address = address


class ICertificate(Interface):
    """A certificate the client presented, and the TLS listener verified, in its handshake."""

    certificate = Attribute(
        "The client's certificate: a pyOpenSSL ``X509`` (what Twisted's TLS"
        " transports give) or a ``cryptography`` ``Certificate``."
    )


@implementer(ICertificate)
@frozen
class ClientCertificate:
    """:ivar certificate: see :class:`ICertificate`."""

    certificate: Any


class InvalidCredentials(UnauthorizedLogin):
    """
    Credentials refused for a reason the client may be told.

    :param reason: a few words for the ERROR frame's ``message`` header
        (``token expired``); never a secret, never the token.
    :param detail: a sentence for the ERROR frame's body.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail or reason


def connect_credentials(
    checked: Any,
    login: str | None,
    passcode: str | None,
    certificate: Any = None,
    address: str = "",
) -> Any:
    """
    Choose the credentials a CONNECT presents (see the module docstring).

    :param checked: the credentials interfaces the portal has checkers for
        (``portal.checkers``).
    :param login: CONNECT's ``login``.
    :param passcode: CONNECT's ``passcode`` (or the WebSocket's bearer token).
    :param certificate: the client's verified TLS certificate, if it has one.
    :param address: the client's address, carried by a password or token.
    :returns: credentials for ``Portal.login``.
    """
    if certificate is not None and ICertificate in checked:
        return ClientCertificate(certificate)
    if login:
        # Text, not bytes as Twisted's annotations say: strcred's memory checker
        # stores str, and the portal encodes for the checkers that want bytes.
        return ClientPassword(login, passcode or "", address)
    if passcode and IBearerToken in checked:
        return BearerToken(passcode, address=address)
    return Anonymous()
