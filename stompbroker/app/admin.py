"""
The ``stompbroker`` subcommands that manage a running broker through its
management API (docs/management.md), with the standard library's ``urllib``::

    stompbroker overview | nodes | connections | queues | detached
    stompbroker close CONNECTION [--reason TEXT]
    stompbroker end-session SESSION
    stompbroker browse DESTINATION [--count N]
    stompbroker purge DESTINATION          stompbroker delete DESTINATION
    stompbroker move DESTINATION TO [--count N] [--copy]
    stompbroker dlq-retry DESTINATION [--count N]
    stompbroker publish DESTINATION [BODY | -] [--header NAME=VALUE ...]

Each takes ``--url`` (default ``$STOMPBROKER_URL``, else
``http://127.0.0.1:15674``), credentials from ``--user`` and ``--password``,
``$STOMPBROKER_USER`` and ``$STOMPBROKER_PASSWORD``, or ``--password-file``
(its first line), or a bearer token from ``--token``, ``$STOMPBROKER_TOKEN`` or
``--token-file`` (for a broker with ``--auth jwt:...``), and prints a table, or
with ``--json`` the API's JSON.

Exit status: 0 done; 1 the broker refused (an error from the API: not found,
no right, bad input), its message printed; 2 a usage error; 3 the broker could
not be reached.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TextIO
from urllib.parse import quote

from stompbroker.app.admin_tables import (
    CONNECTIONS,
    DESTINATIONS,
    DETACHED,
    NODES,
    OVERVIEW,
    POLICIES,
    count_of,
    print_table,
    with_vhost,
)
from stompbroker.app.command_errors import BadUsage, Refused, Unreachable
from stompbroker.broker.features.policies import APPLY_TO, SETTING_KEYS

__all__ = ["DEFAULT_URL", "add_commands", "run"]

DEFAULT_URL = "http://127.0.0.1:15674"
#: Seconds to wait for the broker.
TIMEOUT = 30.0
#: Seconds a TLS handshake may take: a plain-HTTP port given as https:// never answers one.
HANDSHAKE_TIMEOUT = 5.0


class _QuickHandshake(http.client.HTTPSConnection):
    """HTTPS whose TLS handshake gets :data:`HANDSHAKE_TIMEOUT`; the rest, ``TIMEOUT``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connected = False
        self._create_connection = self._connect_then_hurry

    def _connect_then_hurry(self, *args: Any) -> socket.socket:
        connection = socket.create_connection(*args)
        connection.settimeout(HANDSHAKE_TIMEOUT)
        self._connected = True
        return connection

    def connect(self) -> None:
        try:
            super().connect()
        except TimeoutError:
            if self._connected:
                raise NoHandshake() from None
            raise
        self.sock.settimeout(self.timeout)


class NoHandshake(OSError):
    """The server took the connection but never answered the TLS handshake."""


class _QuickHandshakes(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_QuickHandshake, req)


_OPENER = urllib.request.build_opener(_QuickHandshakes())


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url",
        default=os.environ.get("STOMPBROKER_URL", DEFAULT_URL),
        help="the broker's web port (default $STOMPBROKER_URL, else %(default)s)",
    )
    common.add_argument("--user", help="an --auth user (default $STOMPBROKER_USER)")
    common.add_argument("--password", help="their password (default $STOMPBROKER_PASSWORD)")
    common.add_argument(
        "--password-file", metavar="FILE", help="read the password from the first line of FILE"
    )
    common.add_argument(
        "--token",
        help="a bearer token, for a broker with --auth jwt:... (default $STOMPBROKER_TOKEN);"
        " sent instead of --user",
    )
    common.add_argument(
        "--token-file", metavar="FILE", help="read the bearer token from the first line of FILE"
    )
    common.add_argument("--json", action="store_true", help="print the API's JSON")
    return common


#: The subcommands that take --vhost.
_HOSTED = frozenset(
    "connections queues browse purge delete move dlq-retry publish"
    " policies set-policy clear-policy".split()
)

#: Said under each management subcommand's --help.
EXIT_STATUS = (
    "exit status: 0 done; 1 the broker refused (its status and error are printed);"
    " 2 a usage error; 3 the broker could not be reached"
)


def add_commands(commands: Any) -> None:
    """Add the management subcommands to ``stompbroker``'s subparsers."""
    common = _common()

    def add(name: str, help: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = commands.add_parser(
            name, help=help, description=help, epilog=EXIT_STATUS, parents=[common]
        )
        if name in _HOSTED:
            parser.add_argument(
                "--vhost",
                metavar="NAME",
                help="the virtual host (/ for the default one); lists show every host without it,"
                " the others act on the default host",
            )
        return parser

    add("overview", "show the broker's overview (what /stats shows)")
    add("nodes", "list the broker processes")
    add("connections", "list the client connections")
    add("queues", "list the destinations: queues, durable subscriptions, topics")
    close = add("close", "close a client connection; the client gets an ERROR")
    close.add_argument("connection", metavar="CONNECTION", help="its id (see connections)")
    close.add_argument("--reason", default="", help="said in the client's ERROR")
    add("detached", "list the resumable sessions waiting for their client")
    end = add("end-session", "end a detached resumable session for good (its token with it)")
    end.add_argument("session", metavar="SESSION", help="its id (see detached)")
    browse = add("browse", "show the first messages waiting in a queue, leaving them")
    browse.add_argument("destination", metavar="DESTINATION")
    browse.add_argument("--count", type=int, default=10, help="how many (default 10)")
    for name, text in (
        ("purge", "discard what waits in a queue"),
        ("delete", "delete a queue or durable subscription"),
    ):
        add(name, text).add_argument("destination", metavar="DESTINATION")
    move = add("move", "move (or copy) waiting messages to another destination")
    move.add_argument("destination", metavar="DESTINATION")
    move.add_argument("to", metavar="TO")
    move.add_argument("--count", type=int, help="how many (default all)")
    move.add_argument("--copy", action="store_true", help="leave the originals")
    retry = add("dlq-retry", "send a dead-letter queue's messages back where they were sent")
    retry.add_argument("destination", metavar="DESTINATION")
    retry.add_argument("--count", type=int, help="how many (default all)")
    add("policies", "list the per-destination policies")
    policy = add("set-policy", "set (or replace) a per-destination policy; it applies at once")
    policy.add_argument("name", metavar="NAME")
    policy.add_argument("pattern", metavar="PATTERN", help="destination names, wildcards allowed")
    policy.add_argument("--priority", type=int, default=0, help="the highest matching wins")
    policy.add_argument("--apply-to", default="all", choices=APPLY_TO)
    for key in SETTING_KEYS:
        policy.add_argument(f"--{key}", metavar="VALUE", help="see docs/policies.md")
    add("clear-policy", "remove a per-destination policy").add_argument("name", metavar="NAME")
    publish = add("publish", "publish a message (a testing aid)")
    publish.add_argument("destination", metavar="DESTINATION")
    publish.add_argument("body", nargs="?", default="", help="the body; - reads standard input")
    publish.add_argument(
        "--header", action="append", default=[], metavar="NAME=VALUE", help="repeatable"
    )


#: The management subcommands' names.
COMMANDS = (
    "overview nodes connections queues detached close end-session browse purge delete move"
    " dlq-retry publish policies set-policy clear-policy"
).split()


class Client:
    """
    The management API over ``urllib``.

    :param url: the web port's base URL.
    :param user: an ``--auth`` user, or ``None`` to send no credentials.
    :param password: their password.
    :param token: a bearer token, sent instead of the user and password.
    """

    def __init__(
        self, url: str, user: str | None, password: str | None, token: str | None = None
    ) -> None:
        self.url = base_url(url)
        self._authorization = None
        if token:
            self._authorization = f"Bearer {token}"
        elif user:
            token = base64.b64encode(f"{user}:{password or ''}".encode()).decode("ascii")
            self._authorization = f"Basic {token}"

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """
        :returns: the JSON answer.
        :raises Refused: for an error answer, with its ``error`` and ``detail``.
        :raises Unreachable: if the broker cannot be reached.
        """
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(f"{self.url}/api/{path}", data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self._authorization is not None:
            request.add_header("Authorization", self._authorization)
        try:
            with _OPENER.open(request, timeout=TIMEOUT) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            try:
                answer = json.loads(error.read())
                message = f"{answer['error']}: {answer['detail']}"
            except (ValueError, KeyError, TypeError):
                message = error.reason
            raise Refused(f"{error.code} {message}") from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, NoHandshake):
                raise Unreachable(
                    f"{self.url} does not answer TLS within {HANDSHAKE_TIMEOUT:g} s:"
                    " is it a plain http:// port?"
                ) from None
            raise Unreachable(f"cannot reach {self.url}: {reason}") from None
        except http.client.HTTPException as error:
            raise Unreachable(
                f"{self.url} does not answer HTTP ({type(error).__name__}): --url takes the"
                " broker's web port (--http, 15674 by default), not its STOMP port"
            ) from None


def base_url(url: str) -> str:
    """
    :param url: ``--url`` as given: ``http://HOST:PORT`` or ``https://...``, or
        ``HOST:PORT`` alone, which means ``http://HOST:PORT``.
    :returns: the URL without a trailing ``/``.
    :raises BadUsage: for a scheme other than ``http`` or ``https``.
    """
    scheme, separator, _ = url.partition("://")
    if not separator:
        return f"http://{url}".rstrip("/")
    if scheme.lower() not in ("http", "https"):
        raise BadUsage(f"--url takes http://HOST:PORT or https://HOST:PORT, got {url!r}")
    return url.rstrip("/")


def _segment(destination: str) -> str:
    return quote(destination, safe="")


def _first_line(path: str) -> str:
    """:raises Refused: for a file that cannot be read."""
    try:
        with open(path, encoding="utf-8") as file:
            return file.readline().rstrip("\r\n")
    except OSError as error:
        raise Refused(f"cannot read {path}: {error.strerror}") from None


def _client(arguments: argparse.Namespace) -> Client:
    """:raises Refused: for a password or token file that cannot be read."""
    user = arguments.user or os.environ.get("STOMPBROKER_USER")
    password = arguments.password or os.environ.get("STOMPBROKER_PASSWORD")
    if arguments.password_file:
        password = _first_line(arguments.password_file)
    token = arguments.token or os.environ.get("STOMPBROKER_TOKEN")
    if arguments.token_file:
        token = _first_line(arguments.token_file)
    return Client(arguments.url, user, password, token)


def _do(arguments: argparse.Namespace, client: Client, stdin: TextIO) -> tuple[Any, Callable]:
    """:returns: the API's answer, and how to print it as text."""
    command = arguments.command
    if command in ("overview", "nodes", "connections", "queues"):
        listed = "destinations" if command == "queues" else command
        answer = client.call("GET", listed + _vhost(arguments, "?"))
        if command == "overview":
            overview = [answer.get("broker", answer)]
            return answer, lambda out: print_table(overview, OVERVIEW, out)
        if command == "nodes":
            return answer, lambda out: print_table(answer, NODES, out)
        if command == "connections":
            rows = [dict(row, subscriptions=len(row["subscriptions"])) for row in answer]
            return answer, lambda out: print_table(rows, with_vhost(CONNECTIONS, rows), out)
        return answer, lambda out: print_table(answer, with_vhost(DESTINATIONS, answer), out)
    if command == "detached":
        answer = client.call("GET", "detached-sessions")
        return answer, lambda out: print_table(answer, DETACHED, out)
    if command == "end-session":
        answer = client.call("DELETE", f"detached-sessions/{quote(arguments.session, safe='')}")
        return answer, lambda out: print(
            f"ended {answer['id']} ({answer['login'] or 'no login'})", file=out
        )
    if command in ("policies", "set-policy", "clear-policy"):
        return _policy_command(arguments, client)
    path = f"destinations/{_segment(getattr(arguments, 'destination', ''))}"

    def hosted(separator: str) -> str:
        return _vhost(arguments, separator)

    if command == "close":
        reason = f"?reason={quote(arguments.reason)}" if arguments.reason else ""
        answer = client.call(
            "DELETE", f"connections/{quote(arguments.connection, safe='')}" + reason
        )
        return answer, lambda out: print(f"closed {answer['id']} ({answer['peer']})", file=out)
    if command == "browse":
        answer = client.call("GET", f"{path}/messages?count={arguments.count}{hosted('&')}")
        return answer, lambda out: _print_messages(answer, out)
    if command == "purge":
        answer = client.call("DELETE", f"{path}/messages{hosted('?')}")
        purged = count_of(answer["purged"], "message")
        return answer, lambda out: print(f"purged {purged}{_partly(answer)}", file=out)
    if command == "delete":
        answer = client.call("DELETE", path + hosted("?"))
        done = "deleted" if answer.get("deleted", True) else "did not delete"
        return answer, lambda out: print(
            f"{done} {arguments.destination}"
            f" ({count_of(answer['discarded'], 'message')}){_partly(answer)}",
            file=out,
        )
    if command in ("move", "dlq-retry"):
        body: dict[str, Any] = {} if arguments.count is None else {"count": arguments.count}
        if command == "move":
            body.update(to=arguments.to, copy=arguments.copy)
            answer = client.call("POST", f"{path}/move{hosted('?')}", body)
            verb = "copied" if arguments.copy else "moved"
            moved = count_of(answer["moved"], "message")
            return answer, lambda out: print(f"{verb} {moved}{_partly(answer)}", file=out)
        answer = client.call("POST", f"{path}/retry{hosted('?')}", body)
        return answer, lambda out: print(
            f"sent {count_of(answer['retried'], 'message')} back; {answer['left']} without"
            f" an original-destination stayed{_partly(answer)}",
            file=out,
        )
    text = stdin.read() if arguments.body == "-" else arguments.body
    headers = {}
    for header in arguments.header:
        name, equals, value = header.partition("=")
        if not equals:
            raise Refused(f"--header takes NAME=VALUE, got {header!r}")
        headers[name] = value
    answer = client.call("POST", f"{path}/publish{hosted('?')}", {"body": text, "headers": headers})
    return answer, lambda out: print(f"published {answer['message_id']}", file=out)


def _vhost(arguments: argparse.Namespace, separator: str) -> str:
    """:returns: the query naming ``--vhost``'s virtual host, after ``separator``; none without."""
    vhost = getattr(arguments, "vhost", None)
    return f"{separator}vhost={quote(vhost, safe='')}" if vhost is not None else ""


def _partly(answer: dict[str, Any]) -> str:
    """:returns: what to add to an answer some nodes of a cluster did not take part in."""
    if answer.get("complete", True):
        return ""
    return (
        f" (node {answer.get('node')} answered; not what nodes"
        f" {', '.join(answer.get('missing', ()))} hold: they did not answer in time)"
    )


def _policy_command(arguments: argparse.Namespace, client: Client) -> tuple[Any, Callable]:
    """``policies``, ``set-policy``, ``clear-policy``: as rabbitmqctl's."""
    command = arguments.command
    if command == "policies":
        answer = client.call("GET", "policies" + _vhost(arguments, "?"))
        rows = [
            dict(row, definition=",".join(f"{k}={v}" for k, v in row["definition"].items()))
            for row in answer
        ]
        return answer, lambda out: print_table(rows, with_vhost(POLICIES, rows), out)
    path = f"policies/{quote(arguments.name, safe='')}" + _vhost(arguments, "?")
    if command == "clear-policy":
        answer = client.call("DELETE", path)
        return answer, lambda out: print(f"cleared policy {arguments.name}", file=out)
    definition = {
        key: getattr(arguments, key.replace("-", "_"))
        for key in SETTING_KEYS
        if getattr(arguments, key.replace("-", "_")) is not None
    }
    body = {
        "pattern": arguments.pattern,
        "priority": arguments.priority,
        "apply-to": arguments.apply_to,
        "definition": definition,
    }
    answer = client.call("PUT", path, body)
    return answer, lambda out: print(f"set policy {arguments.name}", file=out)


def _print_messages(messages: list[dict[str, Any]], out: TextIO) -> None:
    for message in messages:
        print(
            f"--- {message['message_id']} ({message['size']} bytes, {message['body_encoding']})",
            file=out,
        )
        for name, value in message["headers"].items():
            print(f"{name}: {value}", file=out)
        print(f"\n{message['body']}", file=out)


def run(arguments: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    """
    Run one management subcommand.

    :returns: 0; a failure raises.
    :raises CommandFailed: :class:`Refused` or :class:`Unreachable`, which
        :func:`stompbroker.app.cli.main` prints.
    """
    answer, show = _do(arguments, _client(arguments), stdin)
    if arguments.json:
        json.dump(answer, stdout, indent=1)
        print(file=stdout)
    else:
        show(stdout)
    return 0
