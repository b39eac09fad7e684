"""
The application's HTTP endpoint that decides who may log in and what they may do
(``--auth http:URL``): the requests, the answers, their cache and their counts.

Theory of operation
-------------------
As RabbitMQ's ``rabbitmq_auth_backend_http`` and Centrifugo's connect and
subscribe proxies do, the broker asks the application and does what it answers.
Three kinds of question go to three paths under the configured URL, each a
``POST`` of a JSON object answered by a JSON object with a boolean ``allow``
(docs/security.md gives every field):

- ``user_path`` (``URL/user``): may this ``login`` and ``passcode`` connect, and
  as whom?  Asked for each CONNECT and each token renewal.
- ``vhost_path`` (``URL/vhost``): may this user, logged in, use the virtual host
  its CONNECT selected (``/`` for the default one)?  Asked right after
  ``user_path`` allowed, on every CONNECT and renewal, as RabbitMQ asks its
  ``vhost_path`` on every connection.
- ``resource_path`` (``URL/resource``): may this user ``subscribe`` to or
  ``send`` to this destination?  Asked for each new SUBSCRIBE and each
  destination's first SEND on a connection.

Answers the application gave, allow and deny alike, are kept for ``cache``
seconds (keyed by the user, right and destination; by the user, virtual host
and client address for virtual hosts; by a SHA-256 digest of the login and
passcode, and the client address, for logins, so the passcode is not kept), so that a busy
broker asks once per user and destination in that time.  Questions asked while
the same one is on its way wait for its answer instead of asking again.  An
endpoint that does not answer within ``timeout`` seconds, answers other than
``200`` with such a JSON object, or cannot be reached, makes the question fail
with :class:`EndpointError`; such failures are not cached.

The HTTP client is ``treq``'s, on Twisted's connection pool (persistent
connections, so a warm endpoint costs no TCP handshake); tests pass
``treq.testing.StubTreq``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs
from attrs import define, field, frozen
from twisted.internet.defer import CancelledError, Deferred, succeed
from twisted.python.failure import Failure

from stompbroker.logs import logger
from stompbroker.security.identity import member_info

__all__ = [
    "EndpointError",
    "pooled_client",
    "EndpointFigures",
    "EndpointOptions",
    "HttpEndpoint",
    "ResourceAnswer",
    "UserAnswer",
    "parse_options",
]

log = logger("stompbroker.security.http_endpoint")

#: The options ``--auth http:URL,NAME=VALUE,...`` takes, and what each must be.
_NUMBERS = {"timeout": (0.001, 300.0), "cache": (0.0, 86400.0), "cache_size": (0, 10_000_000)}
_PATHS = ("user_path", "vhost_path", "resource_path")
#: Where an option starts: a colon before a known option's name and "=".
_OPTION_START = re.compile(":(?=(?:" + "|".join((*_PATHS, *_NUMBERS)) + ")=)")


class EndpointError(Exception):
    """
    The endpoint gave no usable answer: a timeout, an HTTP error, a connection
    refused, or an answer that is not a JSON object with a boolean ``allow``.

    :param reason: a sentence for the client's ERROR body and the log; never a secret.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@frozen
class EndpointOptions:
    """
    :ivar url: the application's base URL; the paths are joined to it.
    :ivar user_path: where logins are asked (a path under ``url``, or a full URL).
    :ivar vhost_path: where the use of a virtual host is asked.
    :ivar resource_path: where rights on destinations are asked.
    :ivar timeout: seconds an answer may take; then the question fails.
    :ivar cache: seconds an answer is kept; 0 asks every time.
    :ivar cache_size: answers kept at most; the oldest go first.
    """

    url: str
    user_path: str = "user"
    vhost_path: str = "vhost"
    resource_path: str = "resource"
    timeout: float = 5.0
    cache: float = 60.0
    cache_size: int = 100_000

    def address(self, path: str) -> str:
        """:returns: the URL of ``path`` (a ``*_path`` option's value)."""
        if "://" in path:
            return path
        return self.url.rstrip("/") + "/" + path.lstrip("/")

    @property
    def shown_url(self) -> str:
        """The URL without its user name and password, for statistics and logs."""
        parts = urlsplit(self.url)
        if "@" not in parts.netloc:
            return self.url
        return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def parse_options(argstring: str) -> EndpointOptions:
    """
    Read what follows ``http:`` in ``--auth``: the URL, then ``NAME=VALUE``
    options, colon-separated as ``jwt:``'s are (a colon starts an option only
    before a known option's name and ``=``, so the URL needs no escaping).

    :raises ValueError: for a URL that is not ``http://`` or ``https://``, an
        unknown option, or a value out of range.
    """
    url, *rest = _OPTION_START.split(argstring)
    if not url.startswith(("http://", "https://")):
        raise ValueError(
            f"http: needs the application's URL, http://... or https://..., got {url!r}"
            " (--auth http:http://127.0.0.1:8000/stomp-auth)"
        )
    values: dict[str, Any] = {}
    for item in rest:
        name, _, value = item.partition("=")
        if name in values:
            raise ValueError(f"http: {name} is given twice")
        if name in _PATHS:
            if not value:
                raise ValueError(f"http: {name} needs a path")
            values[name] = value
        elif name in _NUMBERS:
            low, high = _NUMBERS[name]
            try:
                number = float(value) if name != "cache_size" else int(value)
            except ValueError:
                number = low - 1
            if not low <= number <= high:
                raise ValueError(f"http: {name} must be a number from {low:g} to {high:g}")
            values[name] = number
    return EndpointOptions(url, **values)


@frozen
class UserAnswer:
    """
    What the application answered about a login.

    :ivar allow: whether the client may connect.
    :ivar user: the user's name (the login, unless the answer names another).
    :ivar groups: the user's groups.
    :ivar rights: right -> patterns if the answer gave the user's rights, checked
        by the broker itself; ``None`` to ask ``resource_path`` per destination.
    :ivar expires_at: POSIX seconds when the login must be renewed, or ``None``.
    :ivar reason: a denial's reason, for the client, or ``None``.
    :ivar info: the user's presence data (an object), or ``None``
        (:func:`~stompbroker.security.identity.member_info`).
    """

    allow: bool
    user: str = ""
    groups: tuple[str, ...] = ()
    rights: dict[str, tuple[str, ...]] | None = None
    expires_at: float | None = None
    reason: str | None = None
    info: dict[str, Any] | None = None


@frozen
class ResourceAnswer:
    """:ivar allow: whether the right is granted. :ivar reason: a denial's reason, or ``None``."""

    allow: bool
    reason: str | None = None


@define
class PathFigures:
    """
    The counts of one path.

    :ivar asked: HTTP requests made.
    :ivar cached: questions answered from the cache, or by a request on its way.
    :ivar allowed: answers that allowed.
    :ivar denied: answers that denied.
    :ivar timeouts: requests that took longer than ``timeout``.
    :ivar errors: requests that failed otherwise (HTTP error, unreachable, bad answer).
    """

    asked: int = 0
    cached: int = 0
    allowed: int = 0
    denied: int = 0
    timeouts: int = 0
    errors: int = 0


@define
class EndpointFigures:
    """
    The counts of each path of one endpoint, for ``/stats`` and ``/metrics``.

    :ivar url: the endpoint's URL without credentials, which names it there.
    """

    url: str
    user: PathFigures = field(factory=PathFigures)
    vhost: PathFigures = field(factory=PathFigures)
    resource: PathFigures = field(factory=PathFigures)

    def to_dict(self) -> dict[str, dict[str, int]]:
        """:returns: ``{"url": URL, "user": {...}, "vhost": {...}, "resource": {...}}``."""
        return attrs.asdict(self)

    def paths(self) -> dict[str, dict[str, int]]:
        """:returns: path -> outcome -> count (:class:`PathFigures`)."""
        return {
            "user": attrs.asdict(self.user),
            "vhost": attrs.asdict(self.vhost),
            "resource": attrs.asdict(self.resource),
        }


def pooled_client(reactor: Any) -> Any:
    """treq's client on a persistent connection pool of ``reactor``."""
    from treq.client import HTTPClient
    from twisted.web.client import Agent, HTTPConnectionPool

    return HTTPClient(Agent(reactor, pool=HTTPConnectionPool(reactor, persistent=True)))


class HttpEndpoint:
    """
    Asks the application, caches its answers, and counts (see the module docstring).

    :param options: from :func:`parse_options`.
    :param clock: for timeouts and the cache; the global reactor by default
        (strcred, which makes checkers, gives none).
    :param client: has treq's ``post(url, json=...)``; by default treq's on
        ``clock``'s connection pool.
    """

    def __init__(self, options: EndpointOptions, clock: Any = None, client: Any = None) -> None:
        self.options = options
        self.figures = EndpointFigures(options.shown_url)
        self._clock = clock
        self._client = client
        self._cache: dict[Any, tuple[float, Any]] = {}
        self._asking: dict[Any, Deferred[Any]] = {}

    @property
    def clock(self) -> Any:
        """The clock given, or the global reactor, imported when first needed."""
        if self._clock is None:
            from twisted.internet import reactor

            self._clock = reactor
        return self._clock

    def ask_user(self, login: str, passcode: str, ip: str = "") -> Deferred[UserAnswer]:
        """
        :param ip: the client's address (behind a proxy, the one its PROXY header gives).
        :returns: a Deferred of the application's :class:`UserAnswer`, failing
            with :class:`EndpointError`.
        """
        digest = hashlib.sha256(f"{login}\0{passcode}".encode()).digest()
        body = {"login": login, "passcode": passcode, "ip": ip}
        return self._ask(
            self.figures.user,
            ("user", digest, ip),
            self.options.user_path,
            body,
            _user_answer(login),
        )

    def ask_vhost(
        self, user: str, groups: frozenset[str], vhost: str, ip: str = ""
    ) -> Deferred[ResourceAnswer]:
        """
        :param vhost: the virtual host's name, ``/`` for the default one.
        :param ip: the client's address.
        :returns: a Deferred of the application's :class:`ResourceAnswer`,
            failing with :class:`EndpointError`.
        """
        body = {"user": user, "groups": sorted(groups), "vhost": vhost, "ip": ip}
        key = ("vhost", user, vhost, ip)
        return self._ask(self.figures.vhost, key, self.options.vhost_path, body, _resource_answer)

    def ask_resource(
        self, user: str, groups: frozenset[str], right: str, action: str, destination: str
    ) -> Deferred[ResourceAnswer]:
        """
        :param action: ``subscribe`` or ``send``, what the client does.
        :returns: a Deferred of the application's :class:`ResourceAnswer`,
            failing with :class:`EndpointError`.
        """
        body = {
            "user": user,
            "groups": sorted(groups),
            "destination": destination,
            "action": action,
            "right": right,
        }
        key = ("resource", user, right, destination)
        return self._ask(
            self.figures.resource, key, self.options.resource_path, body, _resource_answer
        )

    def _ask(
        self,
        figures: PathFigures,
        key: Any,
        path: str,
        body: dict[str, Any],
        read: Callable[[dict[str, Any]], Any],
    ) -> Deferred[Any]:
        now = self.clock.seconds()
        kept = self._cache.get(key)
        if kept is not None:
            if kept[0] > now:
                figures.cached += 1
                return succeed(kept[1])
            del self._cache[key]
        asking = self._asking.get(key)
        if asking is None:
            figures.asked += 1
            asking = Deferred.fromCoroutine(self._post(figures, path, body, read))
            # Not Deferred.addTimeout: treq's cancelled request fails with its own
            # ResponseNeverReceived, which would not read as a timeout.
            deadline = _Deadline(asking)
            timer = self.clock.callLater(self.options.timeout, deadline.expire)
            asking.addBoth(_cancel_timer, timer)
            asking.addCallbacks(
                self._answered,
                self._failed,
                callbackArgs=(figures, key),
                errbackArgs=(figures, path, deadline),
            )
            if asking.called:
                # StubTreq answers at once: nothing to wait for.
                return asking
            self._asking[key] = asking
            asking.addBoth(self._done, key)
        else:
            figures.cached += 1
        # Each asker gets a Deferred of its own: one's callbacks do not change another's result.
        mine: Deferred[Any] = Deferred()
        asking.addBoth(_pass_on, mine)
        return mine

    async def _post(
        self,
        figures: PathFigures,
        path: str,
        body: dict[str, Any],
        read: Callable[[dict[str, Any]], Any],
    ) -> Any:
        client = self._client
        if client is None:
            client = self._client = pooled_client(self.clock)
        response = await client.post(self.options.address(path), json=body)
        content = await response.content()
        if response.code != 200:
            raise EndpointError(f"the authorization endpoint answered HTTP {response.code}")
        try:
            document = json.loads(content)
        except ValueError:
            document = None
        if not isinstance(document, dict) or not isinstance(document.get("allow"), bool):
            raise EndpointError(
                "the authorization endpoint's answer is not a JSON object with allow true or false"
            )
        try:
            return read(document)
        except (TypeError, ValueError) as error:
            reason = f"the authorization endpoint's answer is invalid: {error}"
            raise EndpointError(reason) from None

    def _answered(self, answer: Any, figures: PathFigures, key: Any) -> Any:
        if answer.allow:
            figures.allowed += 1
        else:
            figures.denied += 1
        options = self.options
        if options.cache > 0 and options.cache_size > 0:
            cache = self._cache
            while len(cache) >= options.cache_size:
                del cache[next(iter(cache))]
            cache[key] = (self.clock.seconds() + options.cache, answer)
        return answer

    def _failed(self, failure: Any, figures: PathFigures, path: str, deadline: _Deadline) -> Any:
        if deadline.expired or failure.check(CancelledError):
            figures.timeouts += 1
            reason = f"the authorization endpoint did not answer within {self.options.timeout:g} s"
        elif failure.check(EndpointError):
            figures.errors += 1
            reason = failure.value.reason
        else:
            figures.errors += 1
            kind = type(failure.value).__name__
            reason = f"the authorization endpoint could not be reached ({kind})"
        shown = EndpointOptions(self.options.shown_url).address(path)
        log.warn("{path}: {reason}", path=shown, reason=reason)
        raise EndpointError(reason)

    def _done(self, result: Any, key: Any) -> Any:
        self._asking.pop(key, None)
        return result


@define
class _Deadline:
    """Cancels a request whose time is up, and remembers that it did."""

    request: Deferred[Any]
    expired: bool = False

    def expire(self) -> None:
        self.expired = True
        self.request.cancel()


def _cancel_timer(result: Any, timer: Any) -> Any:
    if timer.active():
        timer.cancel()
    return result


def _pass_on(result: Any, waiter: Deferred[Any]) -> Any:
    """Fire ``waiter`` with the shared answer, and leave the shared Deferred's result as it was."""
    if isinstance(result, Failure):
        waiter.errback(result)
        return None
    waiter.callback(result)
    return result


def _strings(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{name} must be a list of strings")
    return tuple(value)


def _user_answer(login: str) -> Callable[[dict[str, Any]], UserAnswer]:
    def read(document: dict[str, Any]) -> UserAnswer:
        reason = document.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise ValueError("reason must be a string")
        if not document["allow"]:
            return UserAnswer(False, reason=reason)
        user = document.get("user", login)
        if not isinstance(user, str) or not user:
            raise ValueError("an allowed login needs a user name (the login is empty)")
        rights = document.get("rights")
        if rights is not None:
            if not isinstance(rights, dict):
                raise ValueError("rights must be an object of read, write and admin lists")
            rights = {right: _strings(value, f"rights.{right}") for right, value in rights.items()}
        expires_at = document.get("expires_at")
        if expires_at is not None and (
            isinstance(expires_at, bool) or not isinstance(expires_at, (int, float))
        ):
            raise ValueError("expires_at must be POSIX seconds")
        groups = _strings(document.get("groups", []), "groups")
        info = member_info(document.get("info"))
        return UserAnswer(True, user, groups, rights, expires_at, info=info)

    return read


def _resource_answer(document: dict[str, Any]) -> ResourceAnswer:
    reason = document.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise ValueError("reason must be a string")
    return ResourceAnswer(document["allow"], reason)
