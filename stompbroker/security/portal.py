"""
Who a client is: CONNECT's ``login`` and ``passcode``, checked through ``twisted.cred``.

Theory of operation
-------------------
The broker authenticates with the checkers that ``--auth`` descriptions name,
exactly as other twistd plugins do (``twisted.cred.strcred``: ``memory:alice:secret``,
``unix``, ``file:users.txt``, and our ``passwd:users.txt``).  :func:`make_portal`
puts them behind one :class:`~twisted.cred.portal.Portal` whose realm hands out
:class:`~stompbroker.security.identity.Identity` avatars, chaining several
checkers with :class:`~stompbroker.security.checkers.FirstAcceptingChecker`;
:func:`authenticate` is all a session calls, through an :class:`Authenticator`.
Bearer tokens and client certificates
(:mod:`stompbroker.security.credentials`) get chains of their own, and a
checker of them may tell the client why it refused.

Without any checker there is no authentication: every client is anonymous,
whatever ``login`` it sends, as before ``--auth`` existed.  With checkers,
anonymous access (a CONNECT without ``login``) is refused unless allowed.
A login whose rights must also admit it to its virtual host (the application's,
with ``--auth http:URL``: :class:`~stompbroker.security.identity.IHostAdmission`)
is let in once they do.  A refused login is answered after :data:`FAILED_LOGIN_DELAY`, whatever the
reason, and the passcode never reaches the logs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from attrs import frozen
from twisted.cred.checkers import ANONYMOUS, AllowAnonymousAccess, ICredentialsChecker
from twisted.cred.credentials import IAnonymous, IUsernamePassword
from twisted.cred.error import UnauthorizedLogin, UnhandledCredentials
from twisted.cred.portal import IRealm, Portal
from twisted.internet.defer import CancelledError, Deferred, fail
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import deferLater
from twisted.python.failure import Failure
from zope.interface import Interface, implementer

from stompbroker.logs import logger
from stompbroker.protocol.errors import LoginFailed
from stompbroker.protocol.login import LoginRefused
from stompbroker.security.checkers import FirstAcceptingChecker
from stompbroker.security.credentials import (
    IBearerToken,
    ICertificate,
    InvalidCredentials,
    connect_credentials,
)
from stompbroker.security.identity import (
    ANONYMOUS_IDENTITY,
    Identity,
    IHostAdmission,
    IIdentity,
    avatar_name,
)

__all__ = ["FAILED_LOGIN_DELAY", "Authenticator", "StompRealm", "authenticate", "make_portal"]

log = logger("stompbroker.security.portal")

#: Seconds between a refused login and its answer, to slow down guessing.
FAILED_LOGIN_DELAY = 1.0


@implementer(IRealm)
class StompRealm:
    """Turns avatar ids into :class:`~stompbroker.security.identity.Identity` avatars."""

    def requestAvatar(
        self, avatarId: Any, mind: object, *interfaces: type[Interface]
    ) -> tuple[type[Interface], Identity, Callable[[], None]]:
        """
        :param avatarId: :data:`~twisted.cred.checkers.ANONYMOUS`, an
            :class:`~stompbroker.security.identity.Identity`, or a user name from a
            checker used directly.
        :returns: ``(IIdentity, identity, logout)``.
        :raises NotImplementedError: if
            :class:`~stompbroker.security.identity.IIdentity` is not asked for.
        """
        if IIdentity not in interfaces:
            raise NotImplementedError("the STOMP realm only provides IIdentity")
        if avatarId == ANONYMOUS:
            identity = ANONYMOUS_IDENTITY
        elif isinstance(avatarId, Identity):
            identity = avatarId
        else:
            identity = Identity(avatar_name(avatarId))
        return IIdentity, identity, _logout


def _logout() -> None:
    """Identities hold no resources; logging out has nothing to release."""


def make_portal(checkers: Sequence[ICredentialsChecker], allow_anonymous: bool = False) -> Portal:
    """
    Build the portal a session logs clients in through.

    :param checkers: credentials checkers, usually ``--auth``'s (strcred's
        ``credCheckers``), tried in this order.  Each must check
        ``IUsernamePassword``, ``IAnonymous`` (``--auth anonymous``, which
        allows anonymous access like ``allow_anonymous``; the last such checker
        given makes the anonymous identity), or the bearer tokens
        and client certificates of :mod:`stompbroker.security.credentials`.
    :param allow_anonymous: let a client that sends no ``login`` in, as
        :data:`~stompbroker.security.identity.ANONYMOUS_IDENTITY`.
    :returns: the portal.  With no password or certificate checker at all there
        is no authentication: every client is anonymous, whatever it sends.
    :raises ValueError: for a checker that checks no kind of credentials a client
        can present.
    """
    password_checkers = []
    anonymous_checker: ICredentialsChecker = AllowAnonymousAccess()
    # Bearer tokens and client certificates, each with its own chain of checkers.
    other_checkers: dict[Any, list[ICredentialsChecker]] = {IBearerToken: [], ICertificate: []}
    for checker in checkers:
        interfaces = checker.credentialInterfaces
        for interface, chain in other_checkers.items():
            if interface in interfaces:
                chain.append(checker)
        if IUsernamePassword in interfaces:
            password_checkers.append(checker)
        elif IAnonymous in interfaces:
            allow_anonymous = True
            anonymous_checker = checker
        elif ICertificate not in interfaces:
            raise ValueError(
                f"{type(checker).__name__} checks neither user names and passwords"
                " nor anonymous access, which is all STOMP's CONNECT carries"
            )
    portal = Portal(StompRealm())
    for interface, chain in other_checkers.items():
        if chain:
            portal.registerChecker(FirstAcceptingChecker(chain), interface)
    if not password_checkers and not other_checkers[ICertificate]:
        portal.registerChecker(AllowAnonymousAccess(), IAnonymous, IUsernamePassword)
        return portal
    if password_checkers:
        portal.registerChecker(FirstAcceptingChecker(password_checkers), IUsernamePassword)
    if allow_anonymous:
        portal.registerChecker(anonymous_checker, IAnonymous)
    return portal


def authenticate(
    portal: Portal,
    login: str | None,
    passcode: str | None,
    *,
    clock: IReactorTime,
    failure_delay: float = FAILED_LOGIN_DELAY,
    certificate: Any = None,
    address: str = "",
    vhost: str = "/",
) -> Deferred[Identity]:
    """
    Log a client in with CONNECT's ``login`` and ``passcode`` headers.

    :param portal: from :func:`make_portal`.
    :param login: the ``login`` header; ``None`` or empty means anonymous,
        unless ``passcode`` holds a bearer token or ``certificate`` is given
        (:func:`~stompbroker.security.credentials.connect_credentials`).
    :param passcode: the ``passcode`` header; ``None`` counts as empty.
    :param clock: schedules the answer to a refused login.
    :param failure_delay: seconds between a refusal and its answer.
    :param certificate: the client's verified TLS certificate, for ``--auth cert``.
    :param address: the client's address, which checkers may pass on.
    :param vhost: the virtual host the CONNECT selected (``/``: the default one),
        to which the identity's rights may have to admit it.
    :returns: a Deferred that fires with the client's
        :class:`~stompbroker.security.identity.Identity`, or fails with
        :class:`~stompbroker.protocol.errors.LoginFailed` after ``failure_delay``
        (a :class:`~stompbroker.protocol.login.LoginRefused` naming the
        reason when a token or certificate checker gave one).  Cancelling it (the
        client went away) fails it with ``CancelledError`` at once.
    """
    credentials = connect_credentials(portal.checkers, login, passcode, certificate, address)
    return (
        portal.login(credentials, None, IIdentity)
        .addCallback(_identity_of)
        .addCallback(_admit, vhost, address)
        .addErrback(_refused, clock, failure_delay)
    )


@frozen
class Authenticator:
    """
    What a session calls with CONNECT's ``login`` and ``passcode``: :func:`authenticate`
    through one portal, with the outcome logged.

    The session module imports no Twisted, so it is handed this callable (as
    ``SessionConfig.authenticator``) rather than the portal.  Each outcome is
    logged with the client's address and the user name it gave, never the passcode.

    :ivar portal: from :func:`make_portal`.
    :ivar clock: schedules the answer to a refused login.
    :ivar failure_delay: seconds between a refusal and its answer.
    """

    portal: Portal
    clock: IReactorTime
    failure_delay: float = FAILED_LOGIN_DELAY

    def __call__(
        self,
        login: str | None,
        passcode: str | None,
        peer: str,
        certificate: Any = None,
        vhost: str = "/",
    ) -> Deferred[Identity]:
        """
        :param login: the CONNECT ``login`` header.
        :param passcode: the CONNECT ``passcode`` header.
        :param peer: the client's ``HOST:PORT``, for the log; its host is the
            address checkers may pass on.
        :param certificate: the client's verified TLS certificate, if it has one.
        :param vhost: the virtual host the CONNECT selected, ``/`` for the default one.
        :returns: as :func:`authenticate`.
        """
        host, colon, _ = peer.rpartition(":")
        return authenticate(
            self.portal,
            login,
            passcode,
            clock=self.clock,
            failure_delay=self.failure_delay,
            certificate=certificate,
            address=host if colon else peer,
            vhost=vhost,
        ).addCallbacks(_logged_in, _login_refused, callbackArgs=(peer,), errbackArgs=(login, peer))


def _logged_in(identity: Identity, peer: str) -> Identity:
    if identity.anonymous:
        log.debug("anonymous login from {peer}", peer=peer)
    else:
        log.info("login of {user} from {peer}", user=identity.name, peer=peer)
    return identity


def _login_refused(failure: Failure, login: str | None, peer: str) -> Failure:
    error = failure.value
    if isinstance(error, LoginFailed):
        log.info(
            "login failed for {user} from {peer}{reason}",
            user=login if login else "(anonymous)",
            peer=peer,
            reason=f": {error.reason}" if isinstance(error, LoginRefused) else "",
        )
    return failure


def _identity_of(result: tuple[Any, Any, Any]) -> Identity:
    identity: Identity = result[1]
    return identity


def _admit(identity: Identity, vhost: str, address: str) -> Any:
    """Let the identity's rights admit it to its virtual host, if they must."""
    if IHostAdmission.providedBy(identity.granted):
        return identity.granted.admit(identity, vhost, address)
    return identity


def _refused(failure: Failure, clock: IReactorTime, delay: float) -> Deferred[Identity]:
    if failure.check(CancelledError):
        return fail(failure)
    if not failure.check(UnauthorizedLogin, UnhandledCredentials):
        log.error("login failed with {error_type}", error_type=type(failure.value).__name__)
    refusal = failure.value if isinstance(failure.value, InvalidCredentials) else None
    return deferLater(clock, delay, _raise_login_failed, refusal)


def _raise_login_failed(refusal: InvalidCredentials | None = None) -> Identity:
    if refusal is not None:
        raise LoginRefused(refusal.reason, refusal.detail)
    raise LoginFailed()
