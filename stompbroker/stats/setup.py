"""
What a broker runs with, for operators: its listeners and the settings in force.

The command line (or an embedding application) knows these, the broker does
not: :mod:`stompbroker.app.tap` makes a :class:`RunningSetup` and hands it to
the pages that show it (``/api/overview``, the console's overview, and the
``stompbroker_listener`` and ``stompbroker_setting`` families of ``/metrics``).
Nothing secret goes in: :func:`redact_url` takes the password out of an engine
URL, and the caller leaves out what holds credentials (``--auth``'s checkers).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from attrs import frozen

__all__ = ["Listener", "RunningSetup", "listener", "redact_url"]

#: The URL scheme of each kind of listener and endpoint type.
_SCHEMES = {
    ("stomp", "tcp"): "stomp",
    ("stomp", "tcp6"): "stomp",
    ("stomp", "ssl"): "stomp+ssl",
    ("stomp", "mtls"): "stomp+ssl",
    ("http", "tcp"): "http",
    ("http", "tcp6"): "http",
    ("http", "ssl"): "https",
}
#: A colon that separates the parts of an endpoint description (``\:`` does not).
_SEPARATOR = re.compile(r"(?<!\\):")


@frozen
class Listener:
    """
    One port the broker listens on.

    :ivar kind: ``stomp`` (STOMP over TCP or TLS) or ``http`` (the web port:
        WebSocket at ``/ws``, the API and the pages).
    :ivar endpoint: the Twisted endpoint description it was given.
    :ivar url: where a client reaches it (``stomp://127.0.0.1:61613``,
        ``http://0.0.0.0:15674/``); ``None`` for an endpoint without a port
        (a UNIX socket, say).
    """

    kind: str
    endpoint: str
    url: str | None

    def to_dict(self) -> dict[str, Any]:
        """:returns: the listener as JSON."""
        return {"kind": self.kind, "endpoint": self.endpoint, "url": self.url}


def listener(kind: str, endpoint: str) -> Listener:
    """
    :param kind: ``stomp`` or ``http``.
    :param endpoint: a Twisted server endpoint description, e.g. ``tcp:61613:interface=127.0.0.1``.
    :returns: the listener, with its URL when the endpoint has a port.
    """
    parts = _SEPARATOR.split(endpoint)
    scheme = _SCHEMES.get((kind, parts[0].lower()))
    positional = [part for part in parts[1:] if "=" not in part]
    named = dict(part.split("=", 1) for part in parts[1:] if "=" in part)
    port = named.get("port") or (positional[0] if positional else None)
    if scheme is None or port is None or not port.isdigit():
        return Listener(kind, endpoint, None)
    host = named.get("interface", "").replace("\\:", ":") or "0.0.0.0"
    if ":" in host:
        host = f"[{host}]"
    return Listener(kind, endpoint, f"{scheme}://{host}:{port}" + ("/" if kind == "http" else ""))


def redact_url(value: str) -> str:
    """:returns: ``value`` with the password of a URL's ``user:password@`` replaced by ``***``."""
    parts = urlsplit(value)
    if parts.password is None or parts.hostname is None:
        return value
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


@frozen
class RunningSetup:
    """
    The listeners and the settings in force.

    :ivar listeners: every port the broker listens on.
    :ivar settings: ``(name, value)`` pairs, named as the options are
        (``max-connections``), values as text, nothing secret.
    :ivar units: ``(name, unit)`` pairs of the settings that have one: ``bytes``,
        ``s`` or ``ms``, so that a page can show ``1.0 MiB`` or ``2 min``.
    """

    listeners: tuple[Listener, ...] = ()
    settings: tuple[tuple[str, str], ...] = ()
    units: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(
        cls,
        listeners: Iterable[tuple[str, str]],
        settings: Iterable[tuple[str, Any]],
        units: Mapping[str, str] | None = None,
    ) -> RunningSetup:
        """
        :param listeners: ``(kind, endpoint description)`` pairs.
        :param settings: ``(name, value)`` pairs; a value is shown as text, a
            tuple as its items joined by commas, ``None`` or nothing as ``none``.
        :param units: the unit of each setting that has one.
        """
        shown = tuple(sorted((name, _text(value)) for name, value in settings))
        names = {name for name, _ in shown}
        return cls(
            tuple(listener(kind, endpoint) for kind, endpoint in listeners),
            shown,
            tuple(sorted((name, unit) for name, unit in (units or {}).items() if name in names)),
        )

    def to_dict(self) -> dict[str, Any]:
        """
        :returns: ``listeners`` (a list), ``configuration`` (an object) and
            ``configuration_units`` (the unit of each setting that has one), as JSON.
        """
        return {
            "listeners": [entry.to_dict() for entry in self.listeners],
            "configuration": dict(self.settings),
            "configuration_units": dict(self.units),
        }


def _text(value: Any) -> str:
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(_text(item) for item in value)
    return str(value)
