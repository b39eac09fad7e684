"""
Who may call the management API, from where, and with which right.

Every request passes three checks before :mod:`stompbroker.web.api` acts on it:

1. **Origin.**  A request whose ``Origin`` header is not the broker's own
   origin (``http://`` or ``https://`` and the request's ``Host``), nor one
   that ``--allowed-origin`` allows (:mod:`stompbroker.security.origins`), is
   refused, and a ``POST`` must carry ``Content-Type: application/json``.  The
   API sets no cookie and answers the CORS preflight of allowed origins only,
   so a page of another site can make a browser send neither a JSON ``POST``
   nor a ``DELETE`` (they need a preflight) and cannot read an answer; the
   origin check stops the rest, such as a form or an image that would reuse
   Basic credentials the browser remembers.  An allowed origin's requests are
   answered with ``Access-Control-Allow-Origin`` naming it (and no
   ``Allow-Credentials``: its page sends the ``Authorization`` header itself).
   A reverse proxy must therefore pass the ``Host`` the browser used.
2. **Credentials.**  With ``--auth``, every request carries HTTP Basic
   credentials, checked through the same portal as STOMP logins
   (:func:`stompbroker.security.portal.authenticate`, with its delay on a
   refusal).  Without ``--auth``, the API answers clients on a loopback
   address only, as the broker's own operator (RabbitMQ's ``guest`` user is
   likewise limited to localhost), and refuses every other client.
3. **Rights**, from the access file (``--access``; without one, a logged-in
   user has every right, as on STOMP): ``read`` on a destination to look at
   it (describe, browse), ``admin`` to change it (purge, delete, move from
   it, retry), ``write`` on where a publish, move or retry sends messages.
   Broker-wide views and actions (the overview, connections, nodes, closing a
   connection) need ``read``, or ``admin``, on every destination: a rule ``#``.
   The list of destinations shows those the caller may read.  A destination
   of a virtual host with its own access file is checked against that file,
   on the name its clients know (:mod:`stompbroker.web.api_hosts`).  A login
   through ``--auth http:`` whose answer listed no ``rights`` has its
   application asked about the destination of a publish (:meth:`ApiGuard.ask`),
   as a STOMP SEND's is; the other calls, whose checks cannot wait, need the
   listed rights.  Logins are told the caller's address (``ip``), as STOMP's are.

A refused request gets a JSON error (:class:`ApiError`) and changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
from typing import Any

from twisted.cred.portal import Portal
from twisted.internet.defer import Deferred, fail, succeed
from twisted.web.http import Request

from stompbroker.protocol.errors import AccessDenied, AuthorizationUnavailable, LoginFailed
from stompbroker.protocol.login import LoginRefused
from stompbroker.security.access import ADMIN, READ, WRITE
from stompbroker.security.access_file import AccessControl
from stompbroker.security.credentials import IBearerToken
from stompbroker.security.http_auth import AppRights
from stompbroker.security.identity import Identity
from stompbroker.security.origins import NO_OTHER_ORIGINS, AllowedOrigins
from stompbroker.security.portal import FAILED_LOGIN_DELAY, authenticate

__all__ = ["ADMIN", "EVERYTHING", "LOCAL_OPERATOR", "READ", "WRITE", "ApiError", "ApiGuard"]

#: The pattern a broker-wide right must cover.
EVERYTHING = "#"
#: Who calls the API from this machine on a broker without ``--auth``.
LOCAL_OPERATOR = Identity("local operator")
#: What an allowed origin's preflight is told the API takes.
PREFLIGHT_METHODS = b"GET, POST, PUT, DELETE"
PREFLIGHT_HEADERS = b"Authorization, Content-Type, X-Requested-With"
#: What a console sends so that a 401 does not make the browser ask for a password.
CONSOLE_HEADER = b"x-requested-with"


class ApiError(Exception):
    """
    A request the API refuses: its status, a short error, and a detail naming the problem.

    :param code: the HTTP status.
    :param error: a short phrase, the JSON ``error``.
    :param detail: what exactly was wrong, the JSON ``detail``.
    """

    def __init__(self, code: int, error: str, detail: str = "") -> None:
        super().__init__(f"{code} {error}: {detail}")
        self.code = code
        self.error = error
        self.detail = detail or error

    def document(self) -> dict[str, Any]:
        """:returns: the JSON body."""
        return {"error": self.error, "detail": self.detail}


def own_origin(request: Request) -> str:
    """:returns: the origin a browser gives a page this broker served to ``request``."""
    scheme = "https" if request.isSecure() else "http"
    host = (request.getHeader(b"host") or b"").decode("latin-1")
    return f"{scheme}://{host}"


def is_loopback(request: Request) -> bool:
    """:returns: whether the client connects from a loopback address."""
    host = getattr(request.getClientAddress(), "host", None)
    if host is None:
        return False
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


class ApiGuard:
    """
    The checks of every API request (see the module notes).

    :param portal: the portal of ``--auth``'s password checkers, or ``None``
        without ``--auth`` (loopback clients only).
    :param access: the access rules, or ``None`` for every right to everyone let in.
    :param clock: times the answer to a refused login.
    :param failure_delay: seconds between a refused login and its answer.
    :param allowed_origins: the other web origins whose pages may call the API.
    """

    def __init__(
        self,
        portal: Portal | None,
        access: AccessControl | None,
        clock: Any,
        failure_delay: float = FAILED_LOGIN_DELAY,
        allowed_origins: AllowedOrigins = NO_OTHER_ORIGINS,
    ) -> None:
        self.portal = portal
        self.access = access
        self._clock = clock
        self._failure_delay = failure_delay
        self.allowed_origins = allowed_origins

    def _cross_origin(self, request: Request) -> str | None:
        """
        :returns: the request's ``Origin`` when it is another one than the broker's.
        :raises ApiError: 403 when ``--allowed-origin`` does not allow it.
        """
        header = request.getHeader(b"origin")
        if header is None:
            return None
        origin = header.decode("latin-1")
        if origin == own_origin(request):
            return None
        if not self.allowed_origins.matches(origin):
            others = " and of --allowed-origin" if self.allowed_origins.configured else ""
            raise ApiError(
                403,
                "cross-origin request refused",
                f"the management API answers pages of {own_origin(request)}{others}"
                f" only, not of {origin}",
            )
        request.setHeader(b"access-control-allow-origin", header)
        request.setHeader(b"vary", b"Origin")
        return origin

    def preflight(self, request: Request) -> bytes:
        """
        Answer a CORS preflight (``OPTIONS``): 204 with the methods and headers
        the API takes for an allowed origin, 403 for any other.
        """
        try:
            origin = self._cross_origin(request)
        except ApiError as refusal:
            request.setResponseCode(refusal.code)
            return json.dumps(refusal.document()).encode("utf-8")
        request.setResponseCode(204)
        if origin is not None:
            request.setHeader(b"access-control-allow-methods", PREFLIGHT_METHODS)
            request.setHeader(b"access-control-allow-headers", PREFLIGHT_HEADERS)
            request.setHeader(b"access-control-max-age", b"600")
        return b""

    def check_origin(self, request: Request) -> None:
        """
        :raises ApiError: 403 for a request from another origin that
            ``--allowed-origin`` does not allow, 415 for a
            ``POST`` that is not JSON.
        """
        self._cross_origin(request)
        if request.method == b"POST":
            content_type = (request.getHeader(b"content-type") or b"").decode("latin-1")
            if content_type.split(";")[0].strip().lower() != "application/json":
                raise ApiError(
                    415,
                    "JSON expected",
                    "a POST to the management API needs Content-Type: application/json",
                )

    def identify(self, request: Request) -> Deferred[Identity]:
        """
        :returns: a Deferred firing with who calls, or failing with an :class:`ApiError`
            (403 from another machine without ``--auth``; 401 without valid credentials).
        """
        if self.portal is None:
            if is_loopback(request):
                return succeed(LOCAL_OPERATOR)
            return fail(
                ApiError(
                    403,
                    "management from this machine only",
                    "this broker runs without --auth, so its management API answers"
                    " clients on a loopback address only",
                )
            )
        header = (request.getHeader(b"authorization") or b"").decode("latin-1")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer":
            if IBearerToken not in self.portal.checkers:
                detail = "this broker has no token checker (--auth jwt:...); use HTTP Basic"
                return fail(ApiError(401, "credentials required", detail))
            token = value.strip()
            if not token:
                return fail(ApiError(401, "credentials required", "an empty bearer token"))
            return self._log_in(self.portal, request, None, token)
        if scheme.lower() != "basic":
            detail = "the management API needs HTTP Basic credentials or a bearer token"
            return fail(ApiError(401, "credentials required", detail))
        try:
            user, colon, password = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            user, colon, password = "", "", ""
        if not colon or not user:
            return fail(ApiError(401, "credentials required", "malformed Basic credentials"))
        return self._log_in(self.portal, request, user, password)

    def _log_in(
        self, portal: Portal, request: Request, login: str | None, passcode: str
    ) -> Deferred[Identity]:
        """Log in as a STOMP CONNECT would, telling the checkers the caller's address."""
        checked = authenticate(
            portal,
            login,
            passcode,
            clock=self._clock,
            failure_delay=self._failure_delay,
            address=client_host(request),
        )
        return checked.addErrback(_login_failed)

    def allows(self, identity: Identity, right: str, destination: str, access: Any = None) -> bool:
        """
        :param access: the rules to check instead of the broker's (a virtual
            host's own :class:`AccessControl`), ``None`` for the broker's.
        :returns: whether ``identity`` has ``right`` on ``destination`` (a pattern allowed).
        """
        rules = access if access is not None else self.access
        if identity is LOCAL_OPERATOR or rules is None:
            return True
        return bool(rules.policy.allows(identity, right, destination))

    def require(
        self,
        identity: Identity,
        right: str,
        destination: str = EVERYTHING,
        access: Any = None,
        vhost: str | None = None,
    ) -> None:
        """
        :param destination: what the right is needed on; every destination by default.
        :param access: a virtual host's own rules, as in :meth:`allows`.
        :param vhost: the virtual host of ``destination``, named in a refusal.
        :raises ApiError: 403 naming the missing right.
        """
        if self.allows(identity, right, destination, access):
            return
        where = "every destination (a rule '#')" if destination == EVERYTHING else repr(destination)
        if vhost is not None:
            where = f"{where} in virtual host {vhost!r}"
        raise ApiError(
            403,
            f"no {right} right",
            f"user {identity.name!r} needs the {right} right on {where} for this",
        )

    def ask(
        self,
        identity: Identity,
        right: str,
        destination: str,
        access: Any = None,
        vhost: str | None = None,
    ) -> Deferred[None]:
        """
        :meth:`require` for a call that can wait: a login whose application
        decides per destination (``--auth http:``, no ``rights`` listed) has it asked.

        :returns: a Deferred that fires once allowed, or fails with an
            :class:`ApiError`: 403 naming the missing right (and the
            application's reason), 503 when the application gave no answer.
        """
        granted = identity.granted
        if (
            isinstance(granted, AppRights)
            and granted.asks
            and not self.allows(identity, right, destination, access)
        ):
            return granted.ask(identity, right, destination).addErrback(_app_refused)
        try:
            self.require(identity, right, destination, access, vhost)
        except ApiError as refusal:
            return fail(refusal)
        return succeed(None)

    @staticmethod
    def challenge(request: Request) -> None:
        """Ask a client for Basic credentials, unless it is the console (no browser prompt)."""
        if request.getHeader(CONSOLE_HEADER) is None:
            request.setHeader(b"www-authenticate", b'Basic realm="stompbroker", charset="UTF-8"')


def client_host(request: Request) -> str:
    """:returns: the caller's address (a trusted proxy's client's), as logins are told it."""
    address = request.getClientAddress()
    return str(getattr(address, "host", ""))


def _app_refused(failure: Any) -> None:
    failure.trap(AccessDenied)
    refusal = failure.value
    if isinstance(refusal, AuthorizationUnavailable):
        raise ApiError(503, "authorization unavailable", f"{refusal.message}: {refusal.detail}")
    raise ApiError(403, refusal.message, refusal.detail)


def _login_failed(failure: Any) -> Identity:
    """
    A refused token's detail starts with the few words STOMP's ERROR gives
    (``token expired: ...``), so that scripts can tell the reasons apart.
    """
    failure.trap(LoginFailed)
    refused = failure.value
    if isinstance(refused, LoginRefused):
        detail = refused.detail
        if detail != refused.reason:
            detail = f"{refused.reason}: {detail}"
        raise ApiError(401, "login failed", detail)
    raise ApiError(401, "login failed", "the user name or password was not accepted")
