"""
The options of the broker's edge: the clients' rate limits (``--rate-limit-...``,
``--max-connection-rate``) the proxies trusted to name the client on the web
port (``--trusted-proxy``), and the web origins whose pages may use it
(``--allowed-origin``).

:class:`EdgeOptions` is a mixin of :class:`stompbroker.app.options.Options`
(twistd gathers ``optParameters`` along the class hierarchy); it parses and
checks into ``rate-limits`` (a :class:`~stompbroker.broker.flow.rate_limits.RateLimits`)
``trusted-proxies`` (a :class:`~stompbroker.transport.forwarded.TrustedProxies`)
and ``allowed-origins`` (an :class:`~stompbroker.security.origins.AllowedOrigins`),
which :func:`stompbroker.app.tap.makeService` hands to the broker and the web port.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.python import usage

from stompbroker.app.option_values import non_negative_seconds, parse_size
from stompbroker.broker.flow.rate_limits import Rate, RateLimits, Rates
from stompbroker.security.origins import AllowedOrigins, parse_origin_pattern
from stompbroker.transport.forwarded import TrustedProxies, parse_networks

__all__ = ["LOGIN_KEYS", "EdgeOptions", "parse_login_rates", "parse_rate"]


def parse_rate(text: str, option: str, amount: Callable[[str], float] = float) -> Rate:
    """
    :param text: ``N`` or ``N/BURST``, each read by ``amount``.
    :param option: the option's name, for the error.
    :param amount: reads one number (a size, for bytes).
    :returns: the rate.
    :raises usage.UsageError: naming the option, for anything else.
    """
    rate_text, slash, burst_text = text.partition("/")
    try:
        per_second = amount(rate_text)
        burst = amount(burst_text) if slash else 0.0
        return Rate(per_second, burst)
    except (ValueError, usage.UsageError):
        raise usage.UsageError(
            f"--{option} takes N or N/BURST, N more than 0 (per second), got {text!r}"
        ) from None


def _bytes(text: str) -> float:
    return float(parse_size(text, "rate"))


#: option -> whether it counts bytes (sizes with units) rather than frames.
_RATE_OPTIONS = {
    "rate-limit-messages": False,
    "rate-limit-bytes": True,
    "rate-limit-user-messages": False,
    "rate-limit-user-bytes": True,
}


#: A ``--rate-limit-login`` key -> the broker-wide option it replaces for the login.
LOGIN_KEYS = {
    "messages": "rate-limit-messages",
    "bytes": "rate-limit-bytes",
    "user-messages": "rate-limit-user-messages",
    "user-bytes": "rate-limit-user-bytes",
}


def parse_login_rates(spec: str) -> tuple[str, dict[str, Rate]]:
    """
    Read one ``--rate-limit-login``.

    :param spec: ``LOGIN:KEY=RATE[,KEY=RATE...]``; the login is everything before
        the last colon (a rate holds none), so a login may hold colons itself.
    :returns: the login, and its rates by broker-wide option name.
    :raises usage.UsageError: for a missing login, an unknown key, a key given
        twice, or a bad rate.
    """
    login, colon, pairs = spec.rpartition(":")
    if not colon or not login or not pairs:
        raise usage.UsageError(f"--rate-limit-login takes LOGIN:KEY=RATE[,KEY=RATE], got {spec!r}")
    rates: dict[str, Rate] = {}
    for pair in pairs.split(","):
        key, equals, value = pair.partition("=")
        option = LOGIN_KEYS.get(key.strip())
        if not equals or option is None:
            raise usage.UsageError(
                f"--rate-limit-login {login}: {key.strip()!r} is not a key; the keys are"
                f" {', '.join(LOGIN_KEYS)}"
            )
        if option in rates:
            raise usage.UsageError(f"--rate-limit-login {login}: {key.strip()} is given twice")
        try:
            rates[option] = parse_rate(
                value.strip(), option, _bytes if _RATE_OPTIONS[option] else float
            )
        except usage.UsageError as error:
            # Said of this option, so that the configuration file names its table.
            raise usage.UsageError(f"--rate-limit-login {login}: {key.strip()}: {error}") from None
    return login, rates


def _per_user(specs: Any, defaults: dict[str, Rate | None]) -> dict[str, tuple[Rates, Rates]]:
    """
    :param specs: the ``--rate-limit-login`` values.
    :param defaults: the broker-wide rates by option name, which a login's table
        keeps for the keys it does not give.
    :returns: login -> its ``(connection, user)`` rates (``RateLimits.per_user``).
    :raises usage.UsageError: for a bad value, or a login given twice.
    """
    per_user: dict[str, tuple[Rates, Rates]] = {}
    for spec in specs:
        login, given = parse_login_rates(spec)
        if login in per_user:
            raise usage.UsageError(f"--rate-limit-login {login} is given twice")
        rates = {**defaults, **given}
        per_user[login] = (
            Rates(rates["rate-limit-messages"], rates["rate-limit-bytes"]),
            Rates(rates["rate-limit-user-messages"], rates["rate-limit-user-bytes"]),
        )
    return per_user


class EdgeOptions(usage.Options):
    """The rate-limit and trusted-proxy options; see the module notes."""

    optParameters: list[Any] = [
        [
            "rate-limit-messages",
            None,
            None,
            "Most SEND frames per second a connection may send, as N or N/BURST; a client "
            "over it is read no more until it is back at its rate (default: no limit).",
        ],
        [
            "rate-limit-bytes",
            None,
            None,
            "Most bytes per second a connection may send (with K, M, G), as SIZE or SIZE/BURST "
            "(default: no limit).",
        ],
        [
            "rate-limit-user-messages",
            None,
            None,
            "Most SEND frames per second a login may send across its connections to this "
            "broker, as N or N/BURST (needs --auth; default: no limit).",
        ],
        [
            "rate-limit-user-bytes",
            None,
            None,
            "Most bytes per second a login may send across its connections, as SIZE or "
            "SIZE/BURST (needs --auth; default: no limit).",
        ],
        [
            "rate-limit-over-time",
            None,
            0.0,
            "Seconds a connection may stay over a rate limit before it gets an ERROR and is "
            "closed; 0 only slows it.",
            non_negative_seconds,
        ],
        [
            "max-connection-rate",
            None,
            None,
            "Most new connections per second from one address, as N or N/BURST; more get an "
            "ERROR (default: no limit).",
        ],
    ]

    def opt_rate_limit_login(self, spec: str) -> None:
        """One login's own rate limits, as LOGIN:KEY=RATE[,KEY=RATE], KEY one of messages, bytes, user-messages, user-bytes (repeatable; needs --auth; the configuration file's [rate-limit.user.LOGIN] tables)."""  # noqa: E501
        self.setdefault("rate-limit-login", []).append(spec)

    def opt_trusted_proxy(self, network: str) -> None:
        """Believe the Forwarded and X-Forwarded-For headers on the web port from proxies at this address or CIDR block (repeatable; none by default: the headers are ignored)."""  # noqa: E501
        self.setdefault("trusted-proxy", []).append(network)

    def opt_allowed_origin(self, pattern: str) -> None:
        """Let pages of this web origin open WebSockets and call the management API, as http(s)://HOST[:PORT], *. before HOST for its subdomains, or * (repeatable; without it any origin may open a WebSocket and the API answers the broker's own pages only)."""  # noqa: E501
        self.setdefault("allowed-origin", []).append(pattern)

    def check_edge(self) -> None:
        """
        Read the options into ``rate-limits``, ``trusted-proxies`` and ``allowed-origins``.

        :raises usage.UsageError: with what is wrong.
        """
        rates: dict[str, Rate | None] = {}
        for option, in_bytes in _RATE_OPTIONS.items():
            text = self[option]
            rates[option] = (
                None if text is None else parse_rate(text, option, _bytes if in_bytes else float)
            )
        connection_rate = self["max-connection-rate"]
        limits = RateLimits(
            connection=Rates(rates["rate-limit-messages"], rates["rate-limit-bytes"]),
            user=Rates(rates["rate-limit-user-messages"], rates["rate-limit-user-bytes"]),
            over_time=self["rate-limit-over-time"],
            connection_rate=(
                None
                if connection_rate is None
                else parse_rate(connection_rate, "max-connection-rate")
            ),
            per_user=_per_user(self.get("rate-limit-login", ()), rates),
        )
        if limits.per_user and not self.get("credCheckers"):
            raise usage.UsageError(
                "--rate-limit-login needs --auth: without logins there is no user to count"
            )
        if limits.user and not self.get("credCheckers"):
            raise usage.UsageError(
                "--rate-limit-user-messages and --rate-limit-user-bytes need --auth:"
                " without logins there is no user to count"
            )
        self["rate-limits"] = limits
        networks = tuple(self.get("trusted-proxy", ()))
        self["trusted-proxy"] = networks
        try:
            self["trusted-proxies"] = TrustedProxies(parse_networks(networks))
        except ValueError as error:
            raise usage.UsageError(f"--trusted-proxy: {error}") from None
        patterns = tuple(self.get("allowed-origin", ()))
        self["allowed-origin"] = patterns
        try:
            self["allowed-origins"] = AllowedOrigins(tuple(map(parse_origin_pattern, patterns)))
        except ValueError as error:
            raise usage.UsageError(f"--allowed-origin: {error}") from None
