"""
The statistics export record: one schema for the broker that writes it and the
Spark jobs that read it.

Every ``--stats-interval`` the broker writes one :class:`DestinationRecord` per
destination and one :class:`BrokerRecord` as JSON Lines (see
:mod:`stompbroker.stats.export`).  ``sparkjobs/`` imports this module, and
nothing else of the broker, so this file is the whole contract between them:
field names, Python types, the JSON text of a timestamp, the Spark
``StructType`` (:func:`spark_schema`) and the names of the exported files.

Choices that readers rely on:

- ``ts`` is ISO-8601 in UTC with milliseconds and a ``Z``
  (``2024-05-01T12:00:10.000Z``): readable in a terminal, sortable as text,
  and parsed by Spark straight into a ``TimestampType`` with
  :data:`SPARK_TIMESTAMP_FORMAT`.  It is the *end* of the interval the record
  covers.
- Flow counters (``messages_*``, ``bytes_*``, ``connections_opened`` and
  ``connections_closed``) count what happened *during the interval*
  (``interval_s`` seconds long), so that summing them over any set of records
  gives the total for that period; gauges (``depth``, ``in_flight``,
  ``consumers``, ``connections``, ``rss_bytes``, ``uptime_s``) are the value
  at ``ts``.
- Fields added within a version (:func:`added_columns`: the streams' gauges
  ``retained_messages`` and ``retained_bytes``, and the count
  ``messages_duplicate``) have a default, and a line
  without them (written by an older broker of the same version) reads with it,
  so that files written before and after an upgrade read alike.
- :data:`SCHEMA_VERSION` changes with any other change to the fields.  Readers take
  the records of their own version only and count the others as bad records,
  so that a directory that mixes versions after an upgrade shows up in the
  report instead of being misread.  Keys a reader does not know are ignored.

This module imports neither Twisted nor PySpark (the Spark types are built
inside :func:`spark_schema`), so the broker never needs PySpark and the jobs
need nothing of the broker's runtime: of the broker it imports only the names of
its flow counters (:data:`FLOW_COUNTERS`, from :mod:`stompbroker.broker.flow.counter_names`,
which imports nothing).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
from attrs import field, frozen

# The broker counts under these names; the record below has a field of each, in
# this order (a test checks).  Re-exported: the jobs and the model read it here.
from stompbroker.broker.flow.counter_names import FLOW_COUNTERS as FLOW_COUNTERS

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

SCHEMA_VERSION = 1

FILE_PREFIX = "stats-"
FILE_SUFFIX = ".jsonl"
FILE_GLOB = f"{FILE_PREFIX}*{FILE_SUFFIX}"
"""Matches every published export file, and never one still being written."""

SPARK_TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"
"""The Spark datetime pattern of ``ts``; strict, so that a malformed ``ts`` makes a bad record."""


class StatsRecordError(ValueError):
    """A dictionary or JSON line that is not a valid stats record of this schema version."""


def format_timestamp(moment: datetime) -> str:
    """
    :param moment: a timezone-aware datetime.
    :returns: its ISO-8601 text in UTC with milliseconds, e.g. ``2024-05-01T12:00:10.000Z``.
    """
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_timestamp(text: str) -> datetime:
    """
    :param text: an ISO-8601 timestamp with a UTC offset, as :func:`format_timestamp` writes.
    :returns: the aware UTC datetime.
    :raises StatsRecordError: for text that is not such a timestamp.
    """
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise StatsRecordError(f"ts must be an ISO-8601 timestamp, got {text!r}") from None
    if moment.tzinfo is None:
        raise StatsRecordError(f"ts must carry a UTC offset, got {text!r}")
    return moment.astimezone(UTC)


def to_timestamp(value: datetime | float) -> datetime:
    """
    Normalize a record's ``ts``: UTC, truncated to the millisecond the JSON keeps.

    :param value: an aware datetime, or seconds since the epoch as
        ``IReactorTime.seconds()`` gives them.
    :returns: an aware UTC datetime with whole milliseconds.
    :raises TypeError: for a naive datetime (its zone is unknown) or another type.
    """
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise TypeError("ts must be timezone-aware")
        moment = value.astimezone(UTC)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        moment = datetime.fromtimestamp(value, UTC)
    else:
        raise TypeError(f"ts must be a datetime or epoch seconds, got {type(value).__name__}")
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def _check_count(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{attribute.name} must be an integer, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{attribute.name} must be 0 or more, got {value}")


def _check_amount(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{attribute.name} must be a number, got {type(value).__name__}")
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"{attribute.name} must be a finite number, 0 or more, got {value}")


def _check_text(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{attribute.name} must be a non-empty string, got {value!r}")


def _count(doc: str) -> Any:
    """A non-negative integer field, 0 by default."""
    return field(default=0, validator=_check_count, metadata={"doc": doc})


def _added(doc: str) -> Any:
    """
    A non-negative integer (a gauge or a count) added within this schema version: 0 by default,
    and 0 when a line (an older broker's) lacks it (see the module notes).
    """
    return field(default=0, validator=_check_count, metadata={"doc": doc, "added": True})


def _amount(doc: str, **options: Any) -> Any:
    """A finite non-negative float field; integers become floats so the JSON type is stable."""
    return field(converter=_float, validator=_check_amount, metadata={"doc": doc}, **options)


def _float(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


_TS_DOC = "end of the interval the record covers (UTC)"
_INTERVAL_DOC = "length of the interval the flow counters cover, in seconds"


@frozen
class DestinationRecord:
    """
    What one destination did during one interval.

    Flow counters are deltas over the interval; ``depth``, ``in_flight`` and
    ``consumers`` are gauges at ``ts``.  Each field's ``metadata["doc"]`` is
    its one-line definition; docs/monitoring.md explains them at length.
    """

    kind: ClassVar[str] = "destination"

    ts: datetime = field(converter=to_timestamp, metadata={"doc": _TS_DOC})
    destination: str = field(validator=_check_text, metadata={"doc": "e.g. /queue/orders"})
    interval_s: float = _amount(_INTERVAL_DOC)
    messages_in: int = _count("messages published to the destination (SEND)")
    messages_delivered: int = _count("MESSAGE frames sent to consumers, redeliveries included")
    messages_acked: int = _count("deliveries acknowledged (ACK, or written for ack:auto)")
    messages_nacked: int = _count("deliveries refused with NACK")
    messages_redelivered: int = _count("deliveries flagged redelivered:true")
    messages_expired: int = _count("messages discarded because they expired")
    messages_dead_lettered: int = _count("messages moved to a dead-letter queue")
    messages_dropped: int = _count("messages discarded for another reason, e.g. a full queue")
    bytes_in: int = _count("body bytes published")
    bytes_out: int = _count("body bytes delivered")
    messages_duplicate: int = _added(
        "SENDs not routed: their duplicate-detection id was in the destination's window"
    )
    depth: int = _count("messages waiting, not yet delivered (gauge)")
    in_flight: int = _count("messages delivered and not yet acknowledged (gauge)")
    consumers: int = _count("subscriptions on the destination (gauge)")
    producers: int = _count("distinct connections that published during the interval")
    retained_messages: int = _added(
        "entries a stream keeps (gauge; 0 for other kinds, and for a stream on the redis engine)"
    )
    retained_bytes: int = _added(
        "bytes of the entries a stream keeps, headers and bodies (gauge; 0 as retained_messages)"
    )


@frozen
class BrokerRecord:
    """
    What the whole broker did during one interval.

    ``connections_opened``/``connections_closed`` are deltas (connection churn);
    the other fields are gauges at ``ts``, ``messages_per_second`` being the
    rate of published messages over the interval.
    """

    kind: ClassVar[str] = "broker"

    ts: datetime = field(converter=to_timestamp, metadata={"doc": _TS_DOC})
    interval_s: float = _amount(_INTERVAL_DOC)
    uptime_s: float = _amount("seconds since the broker started", default=0.0)
    connections: int = _count("client connections open (gauge)")
    connections_opened: int = _count("connections accepted during the interval")
    connections_closed: int = _count("connections closed during the interval")
    rss_bytes: int = _count("resident set size of the broker process (gauge)")
    messages_per_second: float = _amount(
        "messages published per second over the interval", default=0.0
    )


StatsRecord = DestinationRecord | BrokerRecord
RECORD_TYPES: tuple[type[DestinationRecord], type[BrokerRecord]] = (DestinationRecord, BrokerRecord)
_BY_KIND = {record_type.kind: record_type for record_type in RECORD_TYPES}


def record_to_dict(record: StatsRecord) -> dict[str, Any]:
    """
    :param record: a record of either kind.
    :returns: the record as the JSON object it is exported as: ``schema_version``,
        ``kind``, then the fields, with ``ts`` as text.
    """
    values = attrs.asdict(record)
    values["ts"] = format_timestamp(values["ts"])
    return {"schema_version": SCHEMA_VERSION, "kind": record.kind, **values}


def record_to_json_line(record: StatsRecord) -> str:
    """:returns: ``record`` as one line of JSON, without the line end."""
    return json.dumps(record_to_dict(record), separators=(",", ":"), ensure_ascii=False)


def record_from_dict(data: Mapping[str, Any]) -> StatsRecord:
    """
    Rebuild a record from its JSON object; unknown keys are ignored (see the module notes).

    :param data: a decoded JSON object of either kind.
    :returns: the :class:`DestinationRecord` or :class:`BrokerRecord` it describes.
    :raises StatsRecordError: for another schema version, a kind that is
        neither, a missing field, or a value of the wrong type.
    """
    version = data.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise StatsRecordError(f"schema_version must be {SCHEMA_VERSION}, got {version!r}")
    record_type = _BY_KIND.get(data.get("kind"))  # type: ignore[arg-type]
    if record_type is None:
        raise StatsRecordError(f"kind must be one of {sorted(_BY_KIND)}, got {data.get('kind')!r}")
    fields = attrs.fields(record_type)
    missing = [f.name for f in fields if f.name not in data and not f.metadata.get("added")]
    if missing:
        raise StatsRecordError(f"{record_type.kind} record lacks {', '.join(missing)}")
    values = {f.name: data[f.name] for f in fields if f.name in data}
    if not isinstance(values["ts"], str):
        raise StatsRecordError(f"ts must be text, got {values['ts']!r}")
    values["ts"] = parse_timestamp(values["ts"])
    try:
        return record_type(**values)
    except (TypeError, ValueError) as error:
        raise StatsRecordError(str(error)) from None


def record_from_json_line(line: str) -> StatsRecord:
    """
    :param line: one exported line.
    :returns: the record.
    :raises StatsRecordError: for text that is not a JSON object, or not a valid record.
    """
    try:
        data = json.loads(line)
    except ValueError as error:
        raise StatsRecordError(f"not JSON: {error}") from None
    if not isinstance(data, dict):
        raise StatsRecordError("a record must be a JSON object")
    return record_from_dict(data)


_COMMON_COLUMNS = (("schema_version", "int"), ("kind", "str"))


def column_types() -> dict[str, str]:
    """
    The columns every export file may hold, in order, with their Python type names.

    Both record kinds share one table: ``schema_version``, ``kind``, then the
    fields of :class:`DestinationRecord` and of :class:`BrokerRecord` in order
    of first appearance.  A column a record's kind lacks is null in Spark.

    :returns: column name to ``"int"``, ``"float"``, ``"str"`` or ``"datetime"``.
    """
    columns = dict(_COMMON_COLUMNS)
    for record_type in RECORD_TYPES:
        for attribute in attrs.fields(record_type):
            columns.setdefault(attribute.name, str(attribute.type))
    return columns


def columns_by_kind() -> dict[str, tuple[str, ...]]:
    """
    :returns: for each ``kind``, the columns its records always carry (besides
        ``schema_version`` and ``kind``); a record lacking one is not valid.
    """
    return {
        record_type.kind: tuple(
            attribute.name
            for attribute in attrs.fields(record_type)
            if not attribute.metadata.get("added")
        )
        for record_type in RECORD_TYPES
    }


def added_columns() -> dict[str, tuple[str, ...]]:
    """
    :returns: for each ``kind``, the columns added within this version, which a
        record may lack (an older broker's), and which then read as 0.
    """
    return {
        record_type.kind: tuple(
            attribute.name
            for attribute in attrs.fields(record_type)
            if attribute.metadata.get("added")
        )
        for record_type in RECORD_TYPES
    }


def spark_schema() -> StructType:
    """
    The Spark schema of the export files, for reading them without inference.

    PySpark is imported here, not at module level, so the broker never needs it.

    :returns: a ``StructType`` with one nullable field per :func:`column_types` entry.
    """
    from pyspark.sql.types import (
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    spark_types = {
        "int": LongType(),
        "float": DoubleType(),
        "str": StringType(),
        "datetime": TimestampType(),
    }
    return StructType(
        [StructField(name, spark_types[kind], True) for name, kind in column_types().items()]
    )
