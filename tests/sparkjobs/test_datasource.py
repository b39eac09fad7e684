"""
The ``stompbroker`` data source against real brokers (``twistd``) and the shared
local SparkSession: batch reads, a streaming query stopped and restarted from
its checkpoint while messages keep arriving, two streams at once, token logins,
writes consumed by ``stomp.py``, refusals, the statistics stream, and two nodes
on a real ``redis-server``.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from sparkjobs import live, report
from sparkjobs.datasource import register
from sparkjobs.stats_io import read_stats_from_broker
from tests.sparkjobs.publishing import keep_publishing
from tests.support import tokens
from tests.support.clients import connect, publish
from tests.support.passwords import secured_broker
from tests.support.process import BrokerProcess, module_broker
from tests.support.redis import RedisServer, node, redis_server  # noqa: F401

pytestmark = pytest.mark.integration

STATS = "/stream/stompbroker.stats"
broker = module_broker(
    "broker", "--stats-stream", STATS, "--stats-interval", "0.5", "--data-dir", "none"
)

retaining = module_broker("retaining", "--stream-max-bytes", "16K", "--data-dir", "none")


@pytest.fixture(scope="module")
def stompbroker_format(spark: SparkSession) -> SparkSession:
    """The shared session, with the format registered."""
    register(spark)
    return spark


def url(process: BrokerProcess) -> str:
    return f"stomp://127.0.0.1:{process.port}"


def read(spark: SparkSession, address: str, destination: str, **options: str) -> list:
    reader = spark.read.format("stompbroker").option("url", address)
    reader = reader.option("destination", destination).option("timeout", "20")
    return reader.options(**options).load().collect()


def test_a_batch_read_returns_every_message_once_in_offset_order(
    broker: BrokerProcess, stompbroker_format: SparkSession
) -> None:
    """Four offset-range partitions give each message once, in offset order, bodies intact."""
    bodies = [f"m{index}".encode() for index in range(200)]
    bodies[7] = b"\x00\xff binary \x00"
    bodies[150] = bytes(range(256)) * 1200  # 300 KiB
    publish(broker.address, "/stream/batch", bodies, region="eu", priority="4")
    reader = (
        stompbroker_format.read.format("stompbroker")
        .option("url", url(broker))
        .option("destination", "/stream/batch")
        .option("partitionsPerStream", "4")
        .option("headerColumns", "region,priority:int")
        .load()
    )
    rows = reader.withColumn("part", F.spark_partition_id()).collect()
    assert [row.body for row in sorted(rows, key=lambda row: row.offset)] == bodies
    assert len({row.offset for row in rows}) == len(bodies)
    for part in {row.part for row in rows}:
        offsets = [row.offset for row in rows if row.part == part]
        assert offsets == sorted(offsets)
    assert {row.part for row in rows} == {0, 1, 2, 3}
    first = min(rows, key=lambda row: row.offset)
    assert (first.region, first.priority, first.destination) == ("eu", 4, "/stream/batch")
    assert first.headers["region"] == "eu" and "subscription" not in first.headers
    assert first.timestamp is not None


def test_a_range_is_read_over_websocket(
    broker: BrokerProcess, stompbroker_format: SparkSession
) -> None:
    """startingOffsets N and endingOffsets M read offsets N to M-1, here over ws://."""
    publish(broker.address, "/stream/range", [str(index).encode() for index in range(20)])
    rows = read(
        stompbroker_format,
        broker.ws_url,
        "/stream/range",
        startingOffsets="5",
        endingOffsets="9",
    )
    assert [row.body for row in rows] == [b"5", b"6", b"7", b"8"]
    with pytest.raises(Exception, match="/stream/empty showed no message within probeTimeout"):
        read(stompbroker_format, url(broker), "/stream/empty", probeTimeout="0.5")


def test_kafka_positions_place_each_stream_by_offset_and_by_timestamp(
    broker: BrokerProcess, stompbroker_format: SparkSession
) -> None:
    """startingOffsets/endingOffsets as Kafka's JSON, and startingOffsetsByTimestamp in ms."""
    publish(broker.address, "/stream/placed-a", [f"a{n}".encode() for n in range(10)])
    publish(broker.address, "/stream/placed-b", [f"b{n}".encode() for n in range(4)])
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    publish(broker.address, "/stream/placed-b", [f"b{n}".encode() for n in range(4, 6)])
    streams = "/stream/placed-a,/stream/placed-b"
    rows = read(
        stompbroker_format,
        url(broker),
        streams,
        startingOffsets='{"/stream/placed-a": {"0": 3}, "/stream/placed-b": -2}',
        endingOffsets='{"/stream/placed-a": 6, "/stream/placed-b": -1}',
    )
    assert sorted(row.body for row in rows) == [b"a3", b"a4", b"a5"] + [
        f"b{n}".encode() for n in range(6)
    ]
    rows = read(
        stompbroker_format,
        url(broker),
        streams,
        startingOffsetsByTimestamp=json.dumps({"/stream/placed-a": 0, "/stream/placed-b": cut}),
    )
    assert sorted(row.body for row in rows if row.destination.endswith("b")) == [b"b4", b"b5"]
    assert len([row for row in rows if row.destination.endswith("a")]) == 10
    with pytest.raises(Exception, match="names /stream/nowhere, which is not read"):
        read(stompbroker_format, url(broker), streams, startingOffsets='{"/stream/nowhere": 1}')


def test_two_streams_are_read_at_once_in_parallel_partitions(
    broker: BrokerProcess, stompbroker_format: SparkSession
) -> None:
    """Two streams, each split in two offset ranges: four partitions, every message of each once."""
    streams = {"/stream/left": 30, "/stream/right": 17}
    for destination, count in streams.items():
        publish(broker.address, destination, [f"{destination} {n}".encode() for n in range(count)])
    rows = (
        stompbroker_format.read.format("stompbroker")
        .option("url", url(broker))
        .option("destination", ",".join(streams))
        .option("partitionsPerStream", "2")
        .load()
        .withColumn("part", F.spark_partition_id())
        .collect()
    )
    assert len({row.part for row in rows}) == 4
    for destination, count in streams.items():
        got = sorted(
            (row for row in rows if row.destination == destination), key=lambda r: r.offset
        )
        assert [row.body for row in got] == [f"{destination} {n}".encode() for n in range(count)]
        assert [row.offset for row in got] == list(range(count))
        assert len({row.part for row in got}) == 2


def test_a_streaming_query_restarted_from_its_checkpoint_loses_and_repeats_nothing(
    broker: BrokerProcess, stompbroker_format: SparkSession, tmp_path: Path
) -> None:
    """Stopped and restarted while messages arrive, the query's output holds each exactly once."""
    destination = "/stream/live"
    publish(broker.address, destination, [b"before"])
    stop = threading.Event()
    sent, publisher = keep_publishing(broker.address, destination, stop)

    def start() -> StreamingQuery:
        frame = (
            stompbroker_format.readStream.format("stompbroker")
            .option("url", url(broker))
            .option("destination", destination)
            .option("maxMessagesPerTrigger", "50")
            .load()
            .select("offset", "body")
        )
        return (
            frame.writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="0.2 seconds")
            .start()
        )

    try:
        query = start()
        deadline = time.monotonic() + 60
        while query.lastProgress is None or query.lastProgress["numInputRows"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert query.lastProgress["numInputRows"] <= 50
        query.stop()
        time.sleep(0.5)  # messages arrive while no query runs
        query = start()
        time.sleep(1)
    finally:
        stop.set()
        publisher.join(10)
    query.processAllAvailable()
    query.stop()
    expected = [b"before"] + [str(number).encode() for number in sent]
    rows = stompbroker_format.read.parquet(str(tmp_path / "out")).orderBy("offset").collect()
    assert [row.body for row in rows] == expected
    assert [row.offset for row in rows] == list(range(len(expected)))


def test_available_now_reads_what_was_there_in_batches_of_the_limit(
    broker: BrokerProcess, stompbroker_format: SparkSession
) -> None:
    """Trigger.AvailableNow with maxMessagesPerTrigger: bounded batches, then the query ends."""
    destination = "/stream/available-now"
    publish(broker.address, destination, [str(number).encode() for number in range(120)])
    frame = (
        stompbroker_format.readStream.format("stompbroker")
        .option("url", url(broker))
        .option("destination", destination)
        .option("maxMessagesPerTrigger", "50")
        .load()
        .select("offset")
    )
    query = (
        frame.writeStream.format("memory")
        .queryName("available_now")
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    batches = [progress["numInputRows"] for progress in query.recentProgress]
    assert [rows for rows in batches if rows] == [50, 50, 20]
    offsets = [
        row.offset for row in stompbroker_format.sql("SELECT offset FROM available_now").collect()
    ]
    assert sorted(offsets) == list(range(120))


def connection_ids(process: BrokerProcess) -> set[str]:
    """:returns: the ids of the broker's client connections, from its management API."""
    address = f"http://127.0.0.1:{process.http_port}/api/connections"
    with urllib.request.urlopen(address, timeout=10) as answer:
        return {row["id"] for row in json.load(answer)}


def test_a_streaming_query_keeps_its_connections_from_batch_to_batch(
    broker: BrokerProcess, stompbroker_format: SparkSession
) -> None:
    """Planning keeps one connection and each reading worker one: no new one in six batches."""
    destination = "/stream/kept"
    publish(broker.address, destination, [b"first"])
    stop = threading.Event()
    _, publisher = keep_publishing(broker.address, destination, stop)
    others = connection_ids(broker)
    query = (
        stompbroker_format.readStream.format("stompbroker")
        .option("url", url(broker))
        .option("destination", destination)
        .load()
        .select("offset")
        .writeStream.format("memory")
        .queryName("kept")
        .trigger(processingTime="0.3 seconds")
        .start()
    )
    try:

        def batches() -> int:
            return sum(1 for progress in query.recentProgress if progress["numInputRows"])

        deadline = time.monotonic() + 60
        while batches() < 2:
            assert time.monotonic() < deadline, query.recentProgress
            time.sleep(0.2)
        seen: list[set[str]] = []
        settled = batches()
        while batches() < settled + 6:
            assert time.monotonic() < deadline + 60, query.recentProgress
            seen.append(connection_ids(broker) - others)
            time.sleep(0.1)
    finally:
        query.stop()
        stop.set()
        publisher.join(10)
    # Planning's and the reading worker's (Spark may keep a second Python worker,
    # and the worker's may not be open yet at the first look): over six batches,
    # a connection per batch would make six or more.
    opened = set().union(*seen)
    assert 1 <= len(opened) <= 3, f"a batch opened a connection of its own: {seen}"
    assert seen[-1], "the query read without a connection"


def test_a_batch_waits_for_min_messages_per_trigger(
    broker: BrokerProcess, stompbroker_format: SparkSession
) -> None:
    """Kafka's minOffsetsPerTrigger: the first trigger runs, then none until five messages wait."""
    destination = "/stream/paced"
    publish(broker.address, destination, [b"0", b"1", b"2"])
    query = (
        stompbroker_format.readStream.format("stompbroker")
        .option("url", url(broker))
        .option("destination", destination)
        .option("minOffsetsPerTrigger", "5")
        .option("maxTriggerDelay", "10m")
        .load()
        .select("offset")
        .writeStream.format("memory")
        .queryName("paced")
        .start()
    )

    def offsets() -> list[int]:
        rows = stompbroker_format.sql("SELECT offset FROM paced").collect()
        return sorted(row.offset for row in rows)

    try:
        query.processAllAvailable()
        assert offsets() == [0, 1, 2]
        publish(broker.address, destination, [b"3", b"4", b"5", b"6"])
        query.processAllAvailable()
        assert offsets() == [0, 1, 2]
        publish(broker.address, destination, [b"7"])
        query.processAllAvailable()
        assert offsets() == list(range(8))
    finally:
        query.stop()
    batches = [progress["numInputRows"] for progress in query.recentProgress]
    assert [rows for rows in batches if rows] == [3, 5]


def test_offsets_removed_by_retention_fail_the_read_unless_told(
    retaining: BrokerProcess, stompbroker_format: SparkSession
) -> None:
    """Kafka's failOnDataLoss: a read from offset 0 of a trimmed stream fails, naming the gap."""
    publish(retaining.address, "/stream/trimmed", [bytes(1024)] * 100)
    with pytest.raises(Exception, match=r"offsets 0 to \d+ were removed by the stream's retention"):
        read(stompbroker_format, url(retaining), "/stream/trimmed", startingOffsets="0")
    rows = read(
        stompbroker_format,
        url(retaining),
        "/stream/trimmed",
        startingOffsets="0",
        failOnDataLoss="false",
    )
    offsets = sorted(row.offset for row in rows)
    assert 0 < offsets[0] and offsets == list(range(offsets[0], 100))


def test_a_dataframe_written_to_a_queue_is_consumed_by_stomp_py(
    broker: BrokerProcess, stompbroker_format: SparkSession
) -> None:
    """Each row is one SEND: body, headers from the map and from the other columns."""
    connection, inbox = connect(broker.address)
    connection.subscribe("/queue/written", id="w", ack="auto")
    rows = [(f"row {index}", {"kind": "test"}, index) for index in range(50)]
    frame = stompbroker_format.createDataFrame(
        rows, "body string, headers map<string,string>, number int"
    ).repartition(2)
    (
        frame.write.format("stompbroker")
        .option("url", url(broker))
        .option("destination", "/queue/written")
        .mode("append")
        .save()
    )
    assert inbox.wait_for(lambda: len(inbox.messages) == 50)
    got = sorted(inbox.messages, key=lambda message: int(message.headers["number"]))
    assert [message.body for message in got] == [f"row {index}".encode() for index in range(50)]
    assert {message.headers["kind"] for message in got} == {"test"}
    connection.disconnect()


def test_rows_read_from_a_stream_and_written_back_go_where_the_option_says(
    broker: BrokerProcess, stompbroker_format: SparkSession
) -> None:
    """Read, change the body, write with option destination: the copy gets every row once."""
    bodies = [f"entry {index}".encode() for index in range(40)]
    publish(broker.address, "/stream/w.source", bodies, kind="audit")
    source = stompbroker_format.read.format("stompbroker").option("url", url(broker))
    source = source.option("destination", "/stream/w.source").option("timeout", "20").load()
    changed = source.withColumn("body", F.concat(F.col("body"), F.lit(b" (copied)")))
    (
        changed.write.format("stompbroker")
        .option("url", url(broker))
        .option("destination", "/stream/w.copy")
        .mode("append")
        .save()
    )
    assert len(read(stompbroker_format, url(broker), "/stream/w.source")) == 40
    copied = read(stompbroker_format, url(broker), "/stream/w.copy")
    assert sorted(row.body for row in copied) == sorted(body + b" (copied)" for body in bodies)
    assert {row.headers["kind"] for row in copied} == {"audit"}


ACCESS = """
[users.reader]
read = ["/stream/open", "/stream/open.#"]
write = ["/queue/allowed"]

[users.owner]
write = ["/stream/#"]
"""


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with secured_broker(
        tmp_path_factory.mktemp("secured"),
        ACCESS,
        ("reader", "secret", ()),
        ("owner", "secret", ()),
        web=True,
    ) as process:
        yield process


def test_reading_without_the_read_right_is_refused(
    secured: BrokerProcess, stompbroker_format: SparkSession
) -> None:
    """A stream the login may not read fails the read with the broker's reason."""
    with pytest.raises(Exception, match="access denied: no read right on '/stream/closed'"):
        read(
            stompbroker_format,
            url(secured),
            "/stream/closed",
            login="reader",
            passcode="secret",
            startingOffsets="0",
            endingOffsets="5",
        )


def test_a_stream_that_shows_nothing_is_refused_naming_those_the_login_may_read(
    secured: BrokerProcess, stompbroker_format: SparkSession
) -> None:
    """The error lists the streams the management API shows this login: not /stream/closed."""
    owner, inbox = connect(secured.address, login="owner", passcode="secret")
    for destination, count in (("/stream/open", 2), ("/stream/closed", 1)):
        for number in range(count):
            owner.send(destination, str(number), receipt=f"{destination}{number}")
    assert inbox.wait_for(lambda: len(inbox.receipts) == 3), inbox.errors
    owner.disconnect()
    for name, said in (
        ("/stream/open.typo", "/stream/open.typo showed no message"),
        ("/stream/opne", "no read right on '/stream/opne'"),
    ):
        with pytest.raises(Exception, match=said) as refused:
            read(
                stompbroker_format,
                url(secured),
                name,
                login="reader",
                passcode="secret",
                probeTimeout="0.5",
                apiUrl=f"http://127.0.0.1:{secured.http_port}",
            )
        assert "the streams this login may read: /stream/open (2 kept)" in str(refused.value)
        assert "/stream/closed" not in str(refused.value)


def test_rows_refused_by_the_broker_are_reported(
    secured: BrokerProcess, stompbroker_format: SparkSession
) -> None:
    """A row to a destination without the write right is refused; the others are sent."""
    frame = stompbroker_format.createDataFrame(
        [("a", "/queue/allowed"), ("b", "/queue/forbidden"), ("c", "/queue/allowed")],
        "body string, destination string",
    ).coalesce(1)
    writer = (
        frame.write.format("stompbroker")
        .option("url", url(secured))
        .option("login", "reader")
        .option("passcode", "secret")
        .mode("append")
    )
    with pytest.raises(Exception, match="refused 1 of 3 rows: partition 0 row 1: access denied"):
        writer.save()


@pytest.fixture(scope="module")
def token_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker that takes HS256 tokens only (``--auth jwt:secret=...``)."""
    workdir = tmp_path_factory.mktemp("tokens")
    with BrokerProcess(
        workdir, "--auth", tokens.hs256_auth(workdir), "--data-dir", "none"
    ) as process:
        yield process


def test_a_stream_is_read_with_a_token_and_refused_without_one(
    token_broker: BrokerProcess, stompbroker_format: SparkSession
) -> None:
    """Option token logs in with a JWT whose scope gives the read right; without it, no read."""
    scope = "stompbroker.read:/stream/tokened stompbroker.write:/stream/tokened"
    token = tokens.make_token(time.time(), tokens.SECRET, "HS256", scope=scope)
    connection, inbox = connect(token_broker.address, login="", passcode=token)
    for index in range(5):
        connection.send("/stream/tokened", f"t{index}", receipt=f"t{index}")
    assert inbox.wait_for(lambda: len(inbox.receipts) == 5)
    connection.disconnect()
    rows = read(stompbroker_format, url(token_broker), "/stream/tokened", token=token)
    assert [row.body for row in rows] == [f"t{index}".encode() for index in range(5)]
    with pytest.raises(Exception, match="StompBrokerError: login failed"):
        read(stompbroker_format, url(token_broker), "/stream/tokened")
    writer = tokens.make_token(time.time(), tokens.SECRET, "HS256", scope=scope.split()[1])
    with pytest.raises(Exception, match="access denied: no read right on '/stream/tokened'"):
        read(stompbroker_format, url(token_broker), "/stream/tokened", token=writer)


def wait_for_stats(address: tuple[str, int], destination: str, count: int) -> set[str]:
    """
    Follow the stats stream over STOMP until its records count ``count`` messages
    sent to ``destination``; :returns: the nodes that counted them.
    """
    connection, inbox = connect(address)
    connection.subscribe(STATS, id="stats", ack="auto", headers={"x-stream-offset": "first"})

    def counted() -> int:
        records = [json.loads(message.body) for message in inbox.messages]
        return sum(
            record.get("messages_in", 0)
            for record in records
            if record.get("destination") == destination
        )

    try:
        assert inbox.wait_for(lambda: counted() == count, 30), counted()
        return {
            message.headers["x-stats-node"]
            for message in inbox.messages
            if json.loads(message.body).get("destination") == destination
            and json.loads(message.body).get("messages_in")
        }
    finally:
        connection.disconnect()


def test_the_statistics_stream_feeds_the_report_and_the_live_job(
    broker: BrokerProcess, stompbroker_format: SparkSession, tmp_path: Path
) -> None:
    """The broker's records arrive on its stats stream; the report and the live job read them."""
    publish(broker.address, "/queue/counted", [b"x"] * 7)
    wait_for_stats(broker.address, "/queue/counted", 7)
    options = {"url": url(broker), "destination": STATS}
    result = report.run_report(stompbroker_format, None, str(tmp_path / "report"), broker=options)
    assert result.summary["bad_records"] == 0
    counted = (
        stompbroker_format.read.parquet(str(tmp_path / "report" / "destination_summary"))
        .where(F.col("destination") == "/queue/counted")
        .collect()
    )
    assert [row.messages_in for row in counted] == [7]
    queries = live.start_queries(
        stompbroker_format,
        None,
        str(tmp_path / "live"),
        str(tmp_path / "checkpoint"),
        once=True,
        state_partitions=1,
        broker=options,
    )
    try:
        for query in queries:
            assert query.awaitTermination(120)
            assert query.exception() is None
            assert sum(progress["numInputRows"] for progress in query.recentProgress) > 0
    finally:
        for query in queries:
            query.stop()


def test_two_nodes_share_one_stream_and_one_stats_stream(
    redis_server: RedisServer,  # noqa: F811
    stompbroker_format: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Messages sent to node A are read through node B; both nodes' stats share one stream."""
    args = ("--stats-stream", STATS, "--stats-interval", "0.5")
    with (
        node(tmp_path_factory.mktemp("a"), redis_server, *args) as a,
        node(tmp_path_factory.mktemp("b"), redis_server, *args) as b,
    ):
        bodies = [str(index).encode() for index in range(100)]
        publish(a.address, "/stream/shared", bodies)
        publish(b.address, "/queue/both", [b"x"] * 3)
        publish(a.address, "/queue/both", [b"x"] * 4)
        rows = read(stompbroker_format, url(b), "/stream/shared", partitionsPerStream="3")
        assert [row.body for row in sorted(rows, key=lambda row: row.offset)] == bodies
        assert len(wait_for_stats(b.address, "/queue/both", 7)) == 2
        stats = read_stats_from_broker(stompbroker_format, {"url": url(a), "destination": STATS})
        both = stats.where(F.col("destination") == "/queue/both").groupBy("node")
        totals = {
            row.node: row.total for row in both.agg(F.sum("messages_in").alias("total")).collect()
        }
        assert sorted(totals.values()) == [3, 4]
