"""
``--auth http:URL``: the application decides, over HTTP, who logs in and what they may do.

:class:`HttpChecker` is the ``twisted.cred`` checker: it hands CONNECT's
``login`` and ``passcode`` (or a bearer token, at CONNECT or renewal through
``/control/credentials``) to the application's ``user_path``
(:mod:`stompbroker.security.http_endpoint`), and makes the
:class:`~stompbroker.security.identity.Identity` its answer describes.

The login allowed, the portal asks the identity's rights to :meth:`AppRights.admit`
it to the virtual host its CONNECT selected (``/`` for the default one): the
application's ``vhost_path``, whose denial is ``login failed: virtual host refused``.

That identity carries its rights, as a token's does, in an :class:`AppRights`
the access rules consult in place of the access file:

- if the application's answer listed the user's ``rights``, they are patterns
  per right, checked here as a token's scopes are, and nothing more is asked;
- otherwise each new SUBSCRIBE, and the first SEND to each destination on the
  connection, is asked of ``resource_path``.  The check cannot wait, so it
  raises :class:`~stompbroker.protocol.errors.AuthorizationPending` with the
  question on its way; the session holds the frame and asks again once the
  answer is in, which the check then finds here.  A SEND's answer is kept for
  the connection's life (later SENDs there cost a dict lookup); a SUBSCRIBE's
  is used once, and the next SUBSCRIBE asks again (through the endpoint's cache).

Clients that send no login (``--allow-anonymous``) are the application's to
decide too, unless an access file gives them its ``[anonymous]`` rules: their
identity carries an :class:`AppRights` of user ``""`` (:data:`ANONYMOUS_USER`),
from :class:`HttpAnonymousChecker`, so that each of their SUBSCRIBEs and first
SENDs is asked of ``resource_path``, and their virtual host of ``vhost_path``.
Without it they would get every right, the application never asked.

An endpoint that fails refuses the frame with
:class:`~stompbroker.protocol.errors.AuthorizationUnavailable`, and a login with
``login failed: authorization unavailable``.
"""

from __future__ import annotations

from typing import Any

from twisted.cred.checkers import ICredentialsChecker
from twisted.cred.credentials import IAnonymous, IUsernamePassword
from twisted.cred.error import UnauthorizedLogin
from twisted.internet.defer import Deferred, fail, succeed
from zope.interface import implementer

from stompbroker.protocol.errors import (
    AccessDenied,
    AuthorizationPending,
    AuthorizationUnavailable,
    ProtocolError,
)
from stompbroker.security.access import READ, WRITE, Grants, denial
from stompbroker.security.credentials import IBearerToken, InvalidCredentials
from stompbroker.security.http_endpoint import (
    EndpointError,
    HttpEndpoint,
    ResourceAnswer,
    UserAnswer,
    parse_options,
)
from stompbroker.security.identity import ANONYMOUS_IDENTITY, Identity, IHostAdmission

__all__ = [
    "ANONYMOUS_USER",
    "AppRights",
    "HttpAnonymousChecker",
    "HttpChecker",
    "anonymous_checker",
    "make_checker",
]

#: The ``user`` the application is told for a client that sent no login.
ANONYMOUS_USER = ""

#: What the client does, by the right it needs, as the application is told.
_ACTIONS = {READ: "subscribe", WRITE: "send"}

#: A question's outcome as a connection keeps it: allowed, or the error to raise.
_ALLOWED = None


@implementer(IHostAdmission)
class AppRights:
    """
    The rights of one login through the application (see the module docstring).

    :param endpoint: asks the application.
    :param user: the user's name.
    :param groups: the user's groups, which the application is told.
    :param grants: the rights the login's answer listed, or ``None`` to ask per destination.
    """

    __slots__ = ("_answers", "_endpoint", "_grants", "_groups", "_sent_to", "_user")

    def __init__(
        self,
        endpoint: HttpEndpoint,
        user: str,
        groups: frozenset[str],
        grants: Grants | None = None,
    ) -> None:
        self._endpoint = endpoint
        self._user = user
        self._groups = groups
        self._grants = grants
        #: (right, destination) -> outcome, answers in for frames held meanwhile.
        self._answers: dict[tuple[str, str], AccessDenied | None] = {}
        #: destinations this connection was allowed to SEND to.
        self._sent_to: set[str] = set()

    @property
    def asks(self) -> bool:
        """Whether rights are asked per destination (the answer listed none)."""
        return self._grants is None

    def allows(self, right: str, destination: str) -> bool:
        """
        Without asking: for the management API, whose checks cannot wait.

        :returns: whether the listed rights grant ``right``, or (when asked per
            destination) whether this connection was allowed to SEND there.
        """
        if self._grants is not None:
            return self._grants.allows(right, destination)
        return right == WRITE and destination in self._sent_to

    def admit(self, identity: Identity, vhost: str, address: str) -> Deferred[Identity]:
        """
        Ask the application whether this login may use ``vhost`` (``vhost_path``).

        :returns: a Deferred of ``identity``, failing with
            :class:`~stompbroker.security.credentials.InvalidCredentials`:
            ``virtual host refused``, or ``authorization unavailable``.
        """
        asking = self._endpoint.ask_vhost(self._user, self._groups, vhost, address)
        return asking.addCallbacks(_admitted, _unavailable, callbackArgs=(identity, vhost))

    def check(self, identity: Identity, right: str, destination: str) -> None:
        """
        :raises AccessDenied: if the application refused (its ``reason`` in the body).
        :raises AuthorizationUnavailable: if the application gave no answer.
        :raises AuthorizationPending: while the question is on its way.
        :raises KeyError: for a right no frame needs (``admin``) without listed rights.
        """
        if self._grants is not None:
            self._grants.check(identity, right, destination)
            return
        if right == WRITE and destination in self._sent_to:
            return
        key = (right, destination)
        if key not in self._answers:
            asking = self._endpoint.ask_resource(
                self._user, self._groups, right, _ACTIONS[right], destination
            )
            asking.addCallbacks(
                self._answered,
                self._failed,
                callbackArgs=(identity, key),
                errbackArgs=(key,),
            )
            if key not in self._answers:
                raise AuthorizationPending(asking)
        outcome = self._answers.pop(key)
        if outcome is not None:
            raise outcome
        if right == WRITE:
            self._sent_to.add(destination)

    def ask(self, identity: Identity, right: str, destination: str) -> Deferred[None]:
        """
        :meth:`check` for a caller that can wait (the management API's publish):
        the application is asked, if its answer is not known yet.

        :returns: a Deferred that fires once allowed, or fails with
            :class:`~stompbroker.protocol.errors.AccessDenied` or
            :class:`~stompbroker.protocol.errors.AuthorizationUnavailable`.
        """
        try:
            self.check(identity, right, destination)
        except AuthorizationPending as pending:
            answer: Deferred[Any] = pending.answer  # type: ignore[assignment]
            return answer.addCallback(lambda _: self.ask(identity, right, destination))
        except AccessDenied as refusal:
            return fail(refusal)
        return succeed(None)

    def _answered(self, answer: ResourceAnswer, identity: Identity, key: tuple[str, str]) -> None:
        right, destination = key
        if answer.allow:
            self._answers[key] = _ALLOWED
        elif answer.reason:
            self._answers[key] = AccessDenied(right, destination, answer.reason)
        else:
            self._answers[key] = denial(identity, right, destination, "the application gives")

    def _failed(self, failure: Any, key: tuple[str, str]) -> None:
        failure.trap(EndpointError)
        right, destination = key
        self._answers[key] = AuthorizationUnavailable(right, destination, failure.value.reason)

    def __repr__(self) -> str:
        return f"AppRights({self._user!r}, grants={self._grants!r})"


@implementer(ICredentialsChecker)
class HttpChecker:
    """
    Logs clients in by the application's answer (see the module docstring).

    :param endpoint: asks the application.
    """

    credentialInterfaces = (IUsernamePassword, IBearerToken)

    def __init__(self, endpoint: HttpEndpoint) -> None:
        self.endpoint = endpoint

    # Its avatar ids are identities, as the token checker's: StompRealm takes them.
    def requestAvatarId(self, credentials: Any) -> Deferred[Identity]:  # type: ignore[override]
        """
        :returns: a Deferred of the identity the application's answer describes,
            failing with :class:`~stompbroker.security.credentials.InvalidCredentials`
            (a denial with a reason, or no answer) or ``UnauthorizedLogin``.
        """
        login = _text(credentials.username)
        passcode = _text(credentials.password)
        # Twisted's own credentials, which tests and plug-ins may pass, carry no address.
        address = getattr(credentials, "address", "")
        asking = self.endpoint.ask_user(login, passcode, address)
        return asking.addCallbacks(self._identity, _unavailable)

    def _identity(self, answer: UserAnswer) -> Identity:
        if not answer.allow:
            if answer.reason:
                raise InvalidCredentials(answer.reason)
            raise UnauthorizedLogin()
        # attrs' converter (frozenset) leaves mypy unsure of the argument's type.
        groups: Any = frozenset(answer.groups)
        grants = None
        if answer.rights is not None:
            try:
                grants = Grants(answer.rights, source="the application's answer gives")
            except (ValueError, ProtocolError) as error:
                raise InvalidCredentials(
                    "authorization unavailable", f"the application's rights are invalid: {error}"
                ) from None
        rights = AppRights(self.endpoint, answer.user, groups, grants)
        return Identity(
            answer.user, groups, granted=rights, expires=answer.expires_at, info=answer.info
        )


@implementer(ICredentialsChecker)
class HttpAnonymousChecker:
    """
    Lets in clients that send no login, with rights the application decides
    (see the module docstring).

    :param endpoint: asks the application.
    """

    credentialInterfaces = (IAnonymous,)

    def __init__(self, endpoint: HttpEndpoint) -> None:
        self.endpoint = endpoint

    def requestAvatarId(self, credentials: Any) -> Deferred[Identity]:  # type: ignore[override]
        """:returns: a Deferred of the anonymous identity, its rights asked per destination."""
        rights = AppRights(self.endpoint, ANONYMOUS_USER, frozenset())
        return succeed(Identity(ANONYMOUS_IDENTITY.name, anonymous=True, granted=rights))


def anonymous_checker(checkers: Any) -> HttpAnonymousChecker | None:
    """
    :param checkers: the ``--auth`` checkers.
    :returns: the checker that lets anonymous clients in with the rights the
        first ``--auth http:`` application decides; ``None`` without one.
    """
    for checker in checkers:
        if isinstance(checker, HttpChecker):
            return HttpAnonymousChecker(checker.endpoint)
    return None


def _text(value: str | bytes) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _admitted(answer: ResourceAnswer, identity: Identity, vhost: str) -> Identity:
    if not answer.allow:
        detail = f"the application does not let {identity.name} use virtual host {vhost!r}"
        raise InvalidCredentials("virtual host refused", answer.reason or detail)
    return identity


def _unavailable(failure: Any) -> Identity:
    failure.trap(EndpointError)
    raise InvalidCredentials("authorization unavailable", failure.value.reason)


def make_checker(argstring: str, clock: Any = None, client: Any = None) -> HttpChecker:
    """
    :param argstring: what follows ``http:`` in ``--auth``
        (:func:`~stompbroker.security.http_endpoint.parse_options`).
    :param clock: as :class:`~stompbroker.security.http_endpoint.HttpEndpoint`'s.
    :param client: as :class:`~stompbroker.security.http_endpoint.HttpEndpoint`'s.
    :raises ValueError: for a bad URL or option.
    """
    return HttpChecker(HttpEndpoint(parse_options(argstring), clock, client))
