"""
The data source's options, read once on the driver into typed values.

Every option is checked here, so that a typo fails ``load()`` or ``save()``
with a message naming the option, rather than a task with a stack trace.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from attrs import frozen

from sparkjobs.datasource.client import ConnectSettings, parse_url
from sparkjobs.datasource.listing import api_url
from sparkjobs.datasource.positions import (
    ENDING_OPTIONS,
    STARTING_OPTIONS,
    End,
    PositionError,
    Start,
    check_range,
    ends,
    starts,
)

#: The types a header column may have (``headerColumns``), as Spark DDL names.
HEADER_TYPES = ("string", "int", "bigint", "double", "boolean", "timestamp")
#: Spark's time strings (``JavaUtils.timeStringAsMs``): a whole number and a unit, ms without one.
_DURATION = re.compile(r"(\d+)\s*(us|ms|s|m|min|h|d)?")
_UNIT_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


class DataSourceOptionError(ValueError):
    """An option is missing or has a value the data source cannot use."""


#: Options both directions take: how to reach the broker.
CONNECT_OPTIONS = (
    "url",
    "login",
    "passcode",
    "token",
    "tlsCaFile",
    "tlsCertFile",
    "tlsKeyFile",
    "timeout",
)
#: Every option a read takes.
READ_OPTIONS = (
    *CONNECT_OPTIONS,
    "destination",
    *STARTING_OPTIONS,
    *ENDING_OPTIONS,
    "partitionsPerStream",
    "headerColumns",
    "prefetch",
    "probeTimeout",
    "apiUrl",
    "maxMessagesPerTrigger",
    "minMessagesPerTrigger",
    "maxTriggerDelay",
    "failOnDataLoss",
)
#: Every option a write takes.
WRITE_OPTIONS = (*CONNECT_OPTIONS, "destination", "window", "onRefused", "headerColumns")
#: Spark's Kafka source's names of options that mean the same here.
KAFKA_ALIASES = {
    "maxOffsetsPerTrigger": "maxMessagesPerTrigger",
    "minOffsetsPerTrigger": "minMessagesPerTrigger",
}
#: Spark's own options, which a streaming query's writer or reader may be handed too.
SPARK_OPTIONS = ("checkpointLocation",)
#: The columns every read row has, which a header column may not be named.
READ_COLUMNS = ("offset", "timestamp", "destination", "headers", "body")


def known_options(options: Mapping[str, str], known: tuple[str, ...], doing: str) -> dict[str, str]:
    """
    :param options: as Spark gives them (its map ignores case, and may give keys in lower case).
    :param doing: ``reading`` or ``writing``, for the message.
    :returns: the options under their own names, Kafka's aliases under ours.
    :raises DataSourceOptionError: for an option neither direction knows: a typo
        would otherwise be ignored, and a Kafka option that means something else
        here silently do nothing.
    """
    names = {name.lower(): name for name in known}
    names.update({alias.lower(): ours for alias, ours in KAFKA_ALIASES.items() if ours in known})
    given: dict[str, str] = {}
    spark_own = {name.lower() for name in SPARK_OPTIONS}
    for key, value in options.items():
        if key.lower() in spark_own:
            continue
        name = names.get(key.lower())
        if name is None:
            close = difflib.get_close_matches(key.lower(), list(names), n=1)
            hint = f" (did you mean {names[close[0]]}?)" if close else ""
            raise DataSourceOptionError(
                f"option {key} is not an option of the stompbroker source when {doing}{hint};"
                f" the options are {', '.join(known)}"
            )
        if name in given:
            raise DataSourceOptionError(f"option {name} is given twice (once as {key})")
        given[name] = value
    return given


@frozen
class ReadOptions:
    """
    :ivar connect: how to reach the broker.
    :ivar destinations: the streams read, in the order given.
    :ivar starting: each stream's :class:`Start`.
    :ivar ending: each stream's :class:`End` (a batch read's; a streaming query has none).
    :ivar partitions: offset ranges each stream is split into, per batch.
    :ivar header_columns: (header name, Spark type) of each typed header column.
    :ivar prefetch: the subscription's window (``prefetch-count``).
    :ivar probe_timeout: seconds to wait for the broker to show a stream's
        first or last message; a stream that shows none is taken as empty.
    :ivar max_per_trigger: streaming: at most this many messages of all the
        streams per micro-batch (``None``: all there are).
    :ivar fail_on_data_loss: whether offsets the read needed that retention had
        removed fail it (Kafka's ``failOnDataLoss``), or only log a warning.
    :ivar min_per_trigger: streaming: a trigger that finds fewer new messages
        than this runs no batch, unless ``max_trigger_delay`` seconds have passed
        since the last batch (``None``: every trigger with news runs one).
    :ivar max_trigger_delay: see ``min_per_trigger``; Kafka's default, 15 minutes.
    :ivar api_url: the broker's web port, where the streams the login may read are listed.
    :ivar bearer: whether the passcode is a token (option ``token``).
    """

    connect: ConnectSettings
    destinations: tuple[str, ...]
    starting: Mapping[str, Start]
    ending: Mapping[str, End]
    partitions: int
    header_columns: tuple[tuple[str, str], ...]
    prefetch: int
    probe_timeout: float
    max_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    min_per_trigger: int | None = None
    max_trigger_delay: float = 900.0
    api_url: str | None = None
    bearer: bool = False


@frozen
class WriteOptions:
    """
    :ivar connect: how to reach the broker.
    :ivar destination: where every row goes; without it, each row's ``destination`` column.
    :ivar window: SENDs in flight awaiting their RECEIPT.
    :ivar fail_on_refused: whether a refused row fails the write (after every
        other row was sent) or is only counted and logged.
    """

    connect: ConnectSettings
    destination: str | None
    window: int
    fail_on_refused: bool
    header_columns: tuple[str, ...] = ()


def _number(options: Mapping[str, str], name: str, default: float, *, whole: bool) -> float:
    text = options.get(name)
    if text is None:
        return default
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        raise DataSourceOptionError(f"option {name} must be a number, got {text!r}") from None
    if value <= 0:
        raise DataSourceOptionError(f"option {name} must be more than 0, got {text!r}")
    return value


def parse_duration(name: str, text: str) -> float:
    """
    :param text: as Spark's time options take it: ``15m``, ``30s``, ``500ms``, ``2h``
        (``us``, ``ms``, ``s``, ``m`` or ``min``, ``h``, ``d``; a bare number is milliseconds).
    :returns: seconds.
    :raises DataSourceOptionError: for anything else, naming option ``name``.
    """
    matched = _DURATION.fullmatch(text.strip().lower())
    if matched is None:
        raise DataSourceOptionError(
            f"option {name} must be a duration such as 15m, 30s or 500ms, got {text!r}"
        )
    return int(matched.group(1)) * _UNIT_SECONDS[matched.group(2) or "ms"]


def connect_settings(options: Mapping[str, str]) -> ConnectSettings:
    """
    :returns: the options ``url``, ``login``, ``passcode`` (or ``token``),
        ``tlsCaFile``, ``tlsCertFile``, ``tlsKeyFile`` and ``timeout``.
    :raises DataSourceOptionError: for a missing or bad ``url``, or both a passcode and a token.
    """
    url = options.get("url")
    if not url:
        raise DataSourceOptionError("option url is required, e.g. stomp://127.0.0.1:61613")
    try:
        parse_url(url)
    except ValueError as error:
        raise DataSourceOptionError(f"option url: {error}") from None
    if options.get("passcode") is not None and options.get("token") is not None:
        raise DataSourceOptionError("give option passcode or option token, not both")
    return ConnectSettings(
        url=url,
        login=options.get("login"),
        passcode=options.get("passcode", options.get("token")),
        ca_file=options.get("tlsCaFile"),
        cert_file=options.get("tlsCertFile"),
        key_file=options.get("tlsKeyFile"),
        timeout=_number(options, "timeout", 30.0, whole=False),
    )


def _destinations(options: Mapping[str, str], *, streams: bool) -> tuple[str, ...]:
    names = tuple(
        name.strip() for name in options.get("destination", "").split(",") if name.strip()
    )
    if streams:
        if not names:
            raise DataSourceOptionError("option destination is required, e.g. /stream/orders")
        for name in names:
            if not name.startswith("/stream/"):
                raise DataSourceOptionError(
                    f"option destination: only /stream/ destinations can be read, got {name!r}"
                )
    return names


def _header_columns(text: str) -> tuple[tuple[str, str], ...]:
    columns: list[tuple[str, str]] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, kind = item.partition(":")
        name, kind = name.strip(), kind.strip().lower() or "string"
        if not name or kind not in HEADER_TYPES:
            raise DataSourceOptionError(
                f"option headerColumns: {item!r} must be NAME or NAME:TYPE, TYPE one of "
                f"{', '.join(HEADER_TYPES)}"
            )
        if name.lower() in READ_COLUMNS:
            raise DataSourceOptionError(
                f"option headerColumns: {name!r} is a column every row has"
                f" ({', '.join(READ_COLUMNS)}); its header is in the headers map"
            )
        if any(name.lower() == other.lower() for other, _ in columns):
            raise DataSourceOptionError(f"option headerColumns names {name!r} twice")
        columns.append((name, kind))
    return tuple(columns)


def read_options(options: Mapping[str, str]) -> ReadOptions:
    """
    :returns: the reader's options.
    :raises DataSourceOptionError: for a missing, unknown or bad option.
    """
    options = known_options(options, READ_OPTIONS, "reading")
    loss = options.get("failOnDataLoss", "true").strip().lower()
    if loss not in ("true", "false"):
        raise DataSourceOptionError(f"option failOnDataLoss must be true or false, got {loss!r}")
    destinations = _destinations(options, streams=True)
    try:
        starting = starts(options, destinations)
        ending = ends(options, destinations)
        check_range(starting, ending)
    except PositionError as error:
        raise DataSourceOptionError(str(error)) from None
    least = _optional_count(options, "minMessagesPerTrigger")
    most = _optional_count(options, "maxMessagesPerTrigger")
    if least is not None and most is not None and least > most:
        raise DataSourceOptionError(
            f"option minMessagesPerTrigger ({least}) is more than maxMessagesPerTrigger ({most})"
        )
    delay = options.get("maxTriggerDelay")
    if delay is not None and least is None:
        raise DataSourceOptionError(
            "option maxTriggerDelay only applies with minMessagesPerTrigger"
            " (how long a trigger may wait for that many messages)"
        )
    connect = connect_settings(options)
    api = options.get("apiUrl")
    if api is not None and urlsplit(api).scheme not in ("http", "https"):
        raise DataSourceOptionError(
            f"option apiUrl must be the web port's http:// or https:// URL, got {api!r}"
        )
    return ReadOptions(
        connect=connect,
        destinations=destinations,
        starting=starting,
        ending=ending,
        partitions=int(_number(options, "partitionsPerStream", 1, whole=True)),
        header_columns=_header_columns(options.get("headerColumns", "")),
        prefetch=int(_number(options, "prefetch", 1000, whole=True)),
        probe_timeout=_number(options, "probeTimeout", 2.0, whole=False),
        max_per_trigger=most,
        fail_on_data_loss=loss == "true",
        min_per_trigger=least,
        max_trigger_delay=900.0 if delay is None else parse_duration("maxTriggerDelay", delay),
        api_url=api_url(connect, api),
        bearer=options.get("token") is not None,
    )


def for_batch(options: ReadOptions) -> ReadOptions:
    """
    :returns: ``options``, for a batch read.
    :raises DataSourceOptionError: for a start after the newest message (Kafka's
        ``latest``, ``-1``): a batch read from there reads nothing, as Kafka's refuses.
    """
    after = [stream for stream, start in options.starting.items() if start.kind == "next"]
    if after:
        raise DataSourceOptionError(
            f"a batch read cannot start at latest (after the newest message) in {', '.join(after)}:"
            " it would read nothing; use last for the newest message"
        )
    return options


def for_stream(options: ReadOptions) -> ReadOptions:
    """
    :returns: ``options``, for a streaming query.
    :raises DataSourceOptionError: for an end: a streaming query follows its
        streams, and would ignore it (Kafka's source refuses it too).
    """
    if any(end.kind != "latest" for end in options.ending.values()):
        raise DataSourceOptionError(
            f"options {', '.join(ENDING_OPTIONS)} are for batch reads: a streaming query"
            " follows its streams (stop it, or use Trigger.AvailableNow)"
        )
    return options


def _optional_count(options: Mapping[str, str], name: str) -> int | None:
    return int(_number(options, name, 1, whole=True)) if name in options else None


def write_options(options: Mapping[str, str]) -> WriteOptions:
    """
    :returns: the writer's options.
    :raises DataSourceOptionError: for a missing, unknown or bad option.
    """
    options = known_options(options, WRITE_OPTIONS, "writing")
    names = _destinations(options, streams=False)
    if len(names) > 1:
        raise DataSourceOptionError("option destination names one destination when writing")
    refused = options.get("onRefused", "fail")
    if refused not in ("fail", "log"):
        raise DataSourceOptionError(f"option onRefused must be fail or log, got {refused!r}")
    return WriteOptions(
        connect=connect_settings(options),
        destination=names[0] if names else None,
        window=int(_number(options, "window", 100, whole=True)),
        fail_on_refused=refused == "fail",
        header_columns=tuple(
            name.strip() for name in options.get("headerColumns", "").split(",") if name.strip()
        ),
    )
