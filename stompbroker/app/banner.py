"""
The start-up banner: once every listener has started, the log says in a few
lines what listens where, as the URLs a client uses, and how the broker runs::

    stompbroker 1.0 ready
      STOMP      stomp://127.0.0.1:61613
      WebSocket  ws://127.0.0.1:15674/ws
      console    http://127.0.0.1:15674/console
      engine     memory
      auth       passwd; clients without a login refused
      access     access.toml
      store      /var/lib/stompbroker (SQLite, sync batch)
      reactor    epoll (uvloop not running: twistd -r uvloop runs it)

The lines are worked out from the options alone (:func:`banner_lines`); no
secret is in them (the engine URL is masked, ``--auth`` shows its kinds).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from stompbroker import __version__
from stompbroker.logs import logger

__all__ = ["banner_lines", "endpoint_urls", "log_banner", "reactor_name"]

log = logger("stompbroker.app")

#: The web paths the banner names: STOMP over WebSocket, and the console.
WEBSOCKET_PATH = "/ws"
CONSOLE_PATH = "/console"
#: Endpoint kinds over TLS.
_TLS_KINDS = ("ssl", "mtls")
#: Endpoint kinds with a port and an ``interface=``.
_PORT_KINDS = ("tcp", "tcp6", *_TLS_KINDS)
_UNESCAPED_COLON = re.compile(r"(?<!\\):")


def endpoint_urls(description: str, web: bool) -> list[tuple[str, str]]:
    """
    :param description: a Twisted server endpoint description (``tcp:61613:interface=127.0.0.1``).
    :param web: whether it is a ``--http`` endpoint (else a ``--listen`` one).
    :returns: (what, URL) pairs: ``stomp://`` (``stomp+ssl://``) for a STOMP
        listener; ``ws://.../ws`` and ``http://.../console`` (``wss``, ``https``)
        for a web one; the description itself for a kind without a port (``unix:``).
    """
    kind, *rest = _UNESCAPED_COLON.split(description)
    if kind not in _PORT_KINDS:
        return [("WebSocket" if web else "STOMP", description)]
    positional = [part for part in rest if "=" not in part]
    keywords = dict(part.split("=", 1) for part in rest if "=" in part)
    port = keywords.get("port", positional[0] if positional else "?")
    host = keywords.get("interface", "::" if kind == "tcp6" else "0.0.0.0").replace("\\:", ":")
    if ":" in host:
        host = f"[{host}]"
    tls = kind in _TLS_KINDS
    if not web:
        return [("STOMP", f"stomp{'+ssl' if tls else ''}://{host}:{port}")]
    return [
        ("WebSocket", f"{'wss' if tls else 'ws'}://{host}:{port}{WEBSOCKET_PATH}"),
        ("console", f"{'https' if tls else 'http'}://{host}:{port}{CONSOLE_PATH}"),
    ]


def reactor_name(reactor: Any) -> str:
    """:returns: ``uvloop``, ``asyncio``, or the reactor's kind (``epoll``, ``select``)."""
    loop = getattr(reactor, "_asyncioEventloop", None)
    if loop is not None:
        return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
    name = type(reactor).__name__.removesuffix("Reactor")
    return name.lower() or "unknown"


def banner_lines(options: Any, reactor: Any) -> list[str]:
    """
    :param options: the parsed :class:`~stompbroker.app.options.Options`.
    :param reactor: the reactor the broker runs on.
    :returns: the banner's lines, the first saying the broker is ready.
    """
    rows = [pair for description in options["listen"] for pair in endpoint_urls(description, False)]
    rows += [pair for description in options["http"] for pair in endpoint_urls(description, True)]
    url = options["engine-url"]
    rows.append(("engine", "memory" if url is None else url.masked))
    rows.append(("auth", _auth(options)))
    rows.append(("access", _access(options)))
    rows += _warnings(options)
    rows.append(("store", _store(options)))
    name = reactor_name(reactor)
    if name != "uvloop":
        name += " (uvloop not running: twistd -r uvloop runs it)"
    rows.append(("reactor", name))
    width = max(len(what) for what, _ in rows)
    return [f"stompbroker {__version__} ready"] + [
        f"  {what.ljust(width)}  {value}" for what, value in rows
    ]


def _auth(options: Any) -> str:
    kinds = options.get("auth-kinds", [])
    if not kinds:
        return "none: every client is let in"
    anonymous = "let in" if options["allow-anonymous"] else "refused"
    return f"{', '.join(kinds)}; clients without a login {anonymous}"


def _access(options: Any) -> str:
    if options["access"]:
        return str(options["access"])
    kinds = options.get("auth-kinds", [])
    if "http" not in kinds:
        return "every client may use every destination"
    if set(kinds) == {"http"}:
        return "as the --auth http application decides"
    return "as the --auth http application decides for its logins; others may use every one"


def _warnings(options: Any) -> list[tuple[str, str]]:
    """:returns: the banner's warnings: what an operator may not expect of the options."""
    if options["allow-anonymous"] and not options["access"]:
        if "http" in options.get("auth-kinds", []):
            return [
                (
                    "WARNING",
                    "clients without a login are let in, and the application is asked about"
                    ' their SUBSCRIBEs and SENDs as user ""'
                    " (--access gives them [anonymous] rules instead)",
                )
            ]
    return []


def _store(options: Any) -> str:
    if options["engine-url"] is not None:
        # No data directory, so no disk of this node's for --disk-free-limit to watch.
        return "in Redis, shared by the cluster's nodes (no disk alarm: none on this node's disk)"
    if options["data-dir"] == "none":
        return "none: every message is in memory only (--data-dir none)"
    limit = options["disk-free-limit"]
    alarm = f"disk alarm under {limit}" if limit.enabled else "no disk alarm"
    return f"{Path(options['data-dir']).absolute()} (SQLite, sync {options['sync']}, {alarm})"


def log_banner(lines: list[str]) -> None:
    """Log the banner, one event per line."""
    for line in lines:
        log.info("{line}", line=line)
