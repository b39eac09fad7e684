"""
The options of ``twistd stompbroker``; the parsers of their values are
:mod:`stompbroker.app.option_values` (``parse_size`` and ``parse_heartbeat`` are
re-exported here, where callers have always found them).

:class:`Options` only parses and checks: it turns the command line into plain
values (sizes in bytes, the heart-beat pair, endpoint descriptions, strcred's
checkers, the access file read once) and refuses, with a
:class:`~twisted.python.usage.UsageError`, any value the broker could not use.
:func:`stompbroker.app.tap.makeService` builds the broker from them.  The
plain options, their defaults and their help are a table of their own,
:mod:`stompbroker.app.option_table`.
"""

from __future__ import annotations

import re
import sys

from OpenSSL import SSL
from twisted.cred import strcred
from twisted.cred.credentials import IAnonymous, IUsernamePassword
from twisted.python import usage

from stompbroker import __version__
from stompbroker.app.config_options import ConfigFileOptions
from stompbroker.app.edge_options import EdgeOptions
from stompbroker.app.engine_options import EngineOptions
from stompbroker.app.option_table import FLAGS, PARAMETERS
from stompbroker.app.option_values import parse_disk_free_limit, parse_heartbeat, parse_size
from stompbroker.app.policy_options import PolicyOptions
from stompbroker.app.redelivery_options import RedeliveryOptions
from stompbroker.app.stream_options import StreamOptions
from stompbroker.app.vhost_options import VhostOptions
from stompbroker.app.webhook_options import WebhookOptions
from stompbroker.app.websocket_options import WebSocketOptions
from stompbroker.broker.queueing.delivery import EXPIRED_ACTIONS
from stompbroker.broker.store.sqlite import SYNC_MODES
from stompbroker.logs import LEVELS
from stompbroker.protocol.session import SLOW_CONSUMER_POLICIES
from stompbroker.security.access_file import AccessControl, AccessFileError
from stompbroker.security.credentials import IBearerToken, ICertificate
from stompbroker.transport.proxy_header import listening_endpoint

__all__ = [
    "DEFAULT_HTTP",
    "DEFAULT_LISTEN",
    "DEFAULT_PORT",
    "Options",
    "parse_heartbeat",
    "parse_size",
]

DEFAULT_PORT = 61613
DEFAULT_LISTEN = f"tcp:{DEFAULT_PORT}:interface=127.0.0.1"
#: The web port (WebSocket, health, demo page): RabbitMQ Web-STOMP's, which its users know.
DEFAULT_HTTP = "tcp:15674:interface=127.0.0.1"


def check_endpoint(option: str, description: str) -> None:
    """
    Build the endpoint ``description`` names, as the start will, without listening:
    Twisted's parsers raise for an unknown type, a port that is no number or an
    argument they do not take, and the TLS ones read the key and certificate files
    there and then, so ``config check`` and a start both find those mistakes here,
    in one line, rather than as a traceback from the listener.  No reactor is
    needed: an endpoint only keeps the one it is given until it listens.

    :raises usage.UsageError: naming the option, the description and the reason.
    """
    try:
        listening_endpoint(None, description)
    except (ValueError, TypeError, KeyError, OSError, SSL.Error) as error:
        raise usage.UsageError(f"--{option} {description}: {_endpoint_reason(error)}") from None


def _endpoint_reason(error: Exception) -> str:
    """:returns: why Twisted's endpoint parser refused a description, in a user's words."""
    if isinstance(error, OSError) and error.strerror:
        return f"{error.strerror} ({error.filename})" if error.filename else error.strerror
    text = str(error)
    if found := _UNKNOWN_ARGUMENT.search(text):
        return f"no such argument {found[1]!r}"
    if found := _NOT_A_NUMBER.search(text):
        return f"{found[1]} is not a number"
    return text


#: Twisted's parsers are functions: a wrong ``key=value`` is a wrong keyword argument.
_UNKNOWN_ARGUMENT = re.compile(r"unexpected keyword argument '([^']*)'")
_NOT_A_NUMBER = re.compile(r"invalid literal for int\(\) with base 10: ('.*')")
#: Below this, a --memory-high or --memory-low without a unit is a unit forgotten.
LEAST_MEMORY_MARK = 1024 * 1024


class Options(
    EngineOptions,
    StreamOptions,
    RedeliveryOptions,
    VhostOptions,
    PolicyOptions,
    WebSocketOptions,
    EdgeOptions,
    WebhookOptions,
    ConfigFileOptions,
    strcred.AuthOptionMixin,
):
    """The options of ``twistd stompbroker``; ``--auth`` comes from ``strcred``."""

    supportedInterfaces = (IUsernamePassword, IAnonymous, ICertificate)

    synopsis = "[options]"
    longdesc = (
        "Run a STOMP 1.0/1.1/1.2 broker. Without --port or --listen it listens on "
        f"{DEFAULT_LISTEN}; without --http its web port (STOMP over WebSocket, health, statistics, "
        f"a dashboard, a demo page) is {DEFAULT_HTTP}. Every listener feeds the same broker."
    )

    optParameters = PARAMETERS
    optFlags = FLAGS

    def __init__(self) -> None:
        super().__init__()
        self["listen"] = []
        self["http"] = []

    # twistd's --help prints an opt_ method's docstring as it is, wrapped to the
    # terminal: a docstring broken over lines would show its indentation, so the
    # long ones stay on one line.

    def opt_port(self, port: str) -> None:
        """Listen on this TCP port on 127.0.0.1 (shorthand for --listen tcp:PORT:interface=127.0.0.1)."""  # noqa: E501
        if not port.isdigit():
            raise usage.UsageError(f"--port takes a port number, got {port!r}")
        self["listen"].append(f"tcp:{port}:interface=127.0.0.1")

    opt_p = opt_port

    def opt_listen(self, description: str) -> None:
        """Listen on a Twisted server endpoint, e.g. tcp:61613, ssl:61614:privateKey=key.pem:certKey=cert.pem, or mtls:...:caCerts=ca.pem to verify client certificates (for --auth cert) (repeatable)."""  # noqa: E501
        self["listen"].append(description)

    def opt_http(self, description: str) -> None:
        """Serve the web port (STOMP over WebSocket at /ws and /stomp, /healthz, /stats, /metrics, /dashboard, the management API at /api/ and console at /console, a demo page at /) on a Twisted server endpoint, e.g. tcp:15674 or ssl:15673:privateKey=key.pem:certKey=cert.pem (repeatable; 'none' turns it off)."""  # noqa: E501
        self["http"].append(description)

    def _check_security(self) -> None:
        """Check --auth, --allow-anonymous and --access, and read the access file."""
        self.setdefault("allow-anonymous", False)
        if self["allow-anonymous"] and not self.get("credCheckers"):
            raise usage.UsageError(
                "--allow-anonymous goes with --auth; without --auth everyone is let in"
            )
        self["access-control"] = None
        if self["access"] is not None:
            try:
                self["access-control"] = AccessControl(self["access"])
            except AccessFileError as error:
                raise usage.UsageError(f"--access: {error}") from None
        checkers = self.get("credCheckers", [])
        if self["access-control"] is None and any(
            IBearerToken in checker.credentialInterfaces for checker in checkers
        ):
            # Tokens carry their rights (scopes), which hold even without an access file.
            self["access-control"] = AccessControl()

    def _check_limits(self) -> None:
        """Check the slow-consumer policy, and read the sizes."""
        if self["slow-consumer"] not in SLOW_CONSUMER_POLICIES:
            raise usage.UsageError(
                f"--slow-consumer must be one of {', '.join(SLOW_CONSUMER_POLICIES)},"
                f" got {self['slow-consumer']!r}"
            )
        buffer = parse_size(self["slow-consumer-buffer"], "slow-consumer-buffer")
        if buffer < 1:
            raise usage.UsageError("--slow-consumer-buffer must be at least 1 byte")
        self["slow-consumer-buffer"] = buffer
        self["resume-buffer"] = parse_size(self["resume-buffer"], "resume-buffer")
        if self["resume-buffer"] < 1:
            raise usage.UsageError("--resume-buffer must be at least 1 byte")
        self["memory-high"] = parse_size(self["memory-high"], "memory-high")
        low = self["memory-low"]
        self["memory-low"] = 0 if low is None else parse_size(low, "memory-low")
        for mark in ("memory-high", "memory-low"):
            if 0 < self[mark] < LEAST_MEMORY_MARK:
                raise usage.UsageError(
                    f"--{mark} {self[mark]} is {self[mark]} bytes, below 1M: give a unit"
                    " (K, M, G) or a share of memory such as 40%, or 0 to turn it off"
                )
        if self["memory-low"] and self["memory-low"] >= self["memory-high"]:
            raise usage.UsageError("--memory-low must be below --memory-high")
        self["disk-free-limit"] = parse_disk_free_limit(str(self["disk-free-limit"]))
        memory = self["queue-memory"]
        self["queue-memory"] = None if memory is None else parse_size(memory, "queue-memory")

    def opt_version(self) -> None:
        """Print the version and exit."""
        print(f"stompbroker {__version__}")
        raise SystemExit(0)

    def opt_auth(self, description: str) -> None:
        """Check CONNECT's login and passcode: passwd:FILE, jwt:jwks=FILE:audience=AUD, cert, memory:USER:PASS, unix, ... (repeatable; --help-auth lists them)."""  # noqa: E501
        try:
            super().opt_auth(description)
            self.setdefault("auth-kinds", []).append(description.split(":", 1)[0])
        except usage.UsageError as error:
            # Only the kind: the rest may hold a password (memory:USER:PASS).
            kind = description.split(":", 1)[0]
            reason = str(error).removeprefix("Unexpected error: ")
            raise usage.UsageError(f"--auth {kind}: {reason}") from None

    def opt_allow_anonymous(self) -> None:
        """With --auth, also let in clients that send no login."""
        self["allow-anonymous"] = True

    def parseOptions(self, options: list[str] | None = None) -> None:
        """Parse, keeping the arguments as given (``--workers`` hands them to its workers)."""
        self.argv = list(sys.argv[1:] if options is None else options)
        super().parseOptions(self.argv)

    def postOptions(self) -> None:
        self["heartbeat"] = parse_heartbeat(self["heartbeat"])
        self["heartbeat-min"] = parse_heartbeat(self["heartbeat-min"], "heartbeat-min")
        self._check_security()
        self._check_limits()
        self.check_engine()
        self.check_streams(parse_size)
        self.check_redelivery()
        self.check_vhosts()
        self.check_policies()
        self.check_websocket()
        self.check_edge()
        self.check_webhook()
        if self["log-level"] not in LEVELS:
            raise usage.UsageError(
                f"--log-level must be one of {', '.join(LEVELS)}, got {self['log-level']!r}"
            )
        if self["expired"] not in EXPIRED_ACTIONS:
            raise usage.UsageError(
                f"--expired must be {' or '.join(EXPIRED_ACTIONS)}, got {self['expired']!r}"
            )
        if self["sync"] not in SYNC_MODES:
            raise usage.UsageError(
                f"--sync must be one of {', '.join(SYNC_MODES)}, got {self['sync']!r}"
            )
        if not self["data-dir"]:
            raise usage.UsageError("--data-dir needs a directory, or none")
        if self["data-dir"] == "none" and self["persistent-queues"]:
            raise usage.UsageError(
                "--persistent-queues needs a message store; it cannot go with --data-dir none"
            )
        prefix = self["dead-letter-prefix"]
        if not prefix or "/" in prefix:
            raise usage.UsageError(
                f"--dead-letter-prefix must be non-empty and hold no '/', got {prefix!r}"
            )
        if not self["listen"]:
            self["listen"] = [DEFAULT_LISTEN]
        if not self["http"]:
            self["http"] = [DEFAULT_HTTP]
        elif "none" in self["http"]:
            if len(self["http"]) > 1:
                raise usage.UsageError(
                    "--http none turns the web port off; it takes no other --http"
                )
            self["http"] = []
        self.check_workers([*self["listen"], *self["http"]])
        for option in ("listen", "http"):
            for description in self[option]:
                check_endpoint(option, description)
