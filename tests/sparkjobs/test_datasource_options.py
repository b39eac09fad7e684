"""The ``stompbroker`` data source's options: what they become, and the errors that name them."""

from __future__ import annotations

import pytest

from sparkjobs.datasource.options import (
    DataSourceOptionError,
    for_batch,
    for_stream,
    read_options,
    write_options,
)
from sparkjobs.datasource.positions import End, Start
from sparkjobs.datasource.reading import split

BASE = {"url": "stomp://127.0.0.1:61613", "destination": "/stream/a, /stream/b"}


def test_defaults_and_given_values() -> None:
    options = read_options(BASE)
    assert options.destinations == ("/stream/a", "/stream/b")
    assert options.starting == {"/stream/a": Start("first"), "/stream/b": Start("first")}
    assert set(options.ending.values()) == {End("latest")}
    assert options.max_per_trigger is None
    given = read_options(
        {
            **BASE,
            "startingOffsets": "timestamp=1700000000.5",
            "endingOffsets": "40",
            "maxMessagesPerTrigger": "500",
            "headerColumns": "region, priority:INT",
        }
    )
    assert given.starting["/stream/b"].header() == "timestamp=1700000000.5"
    assert (given.ending["/stream/a"], given.max_per_trigger) == (End("offset", 40), 500)
    assert given.header_columns == (("region", "string"), ("priority", "int"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"destination": "/stream/a"}, "option url is required"),
        ({**BASE, "url": "http://host"}, "option url: url must start with"),
        ({**BASE, "destination": "/queue/a"}, "only /stream/ destinations can be read"),
        ({**BASE, "startingOffsets": "soon"}, "option startingOffsets must be"),
        ({**BASE, "endingOffsets": "-1"}, "option endingOffsets must be"),
        ({**BASE, "maxMessagesPerTrigger": "0"}, "option maxMessagesPerTrigger must be more"),
        ({**BASE, "maxMessagesPerTrigger": "many"}, "option maxMessagesPerTrigger must be a"),
        ({**BASE, "headerColumns": "n:float"}, "option headerColumns: 'n:float'"),
        ({**BASE, "passcode": "p", "token": "t"}, "not both"),
        (
            {**BASE, "maxMesagesPerTrigger": "5"},
            "option maxMesagesPerTrigger is not an option of the stompbroker source when reading"
            r" \(did you mean maxMessagesPerTrigger\?\)",
        ),
        ({**BASE, "minPartitions": "4"}, "option minPartitions is not an option"),
        ({**BASE, "failOnDataLoss": "no"}, "option failOnDataLoss must be true or false"),
        ({**BASE, "maxOffsetsPerTrigger": "5", "maxMessagesPerTrigger": "5"}, "given twice"),
        (
            {**BASE, "startingOffsets": "50", "endingOffsets": "40"},
            r"the start of /stream/a \(50\) is after its end \(40\)",
        ),
        ({**BASE, "headerColumns": "offset,body"}, "'offset' is a column every row has"),
        ({**BASE, "headerColumns": "region,Region:int"}, "names 'Region' twice"),
        (
            {**BASE, "minMessagesPerTrigger": "9", "maxMessagesPerTrigger": "5"},
            r"minMessagesPerTrigger \(9\) is more than maxMessagesPerTrigger \(5\)",
        ),
        ({**BASE, "maxTriggerDelay": "1m"}, "maxTriggerDelay only applies with minMessages"),
        (
            {**BASE, "minMessagesPerTrigger": "9", "maxTriggerDelay": "soon"},
            "option maxTriggerDelay must be a duration such as 15m",
        ),
    ],
)
def test_a_bad_read_option_is_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(DataSourceOptionError, match=message):
        read_options(options)


@pytest.mark.parametrize(
    ("options", "starting", "ending"),
    [
        (
            {"startingOffsets": '{"/stream/a": {"0": 23}, "/stream/b": -2}'},
            {"/stream/a": Start("offset", 23), "/stream/b": Start("first")},
            {"/stream/a": End("latest"), "/stream/b": End("latest")},
        ),
        (
            {"startingOffsets": "earliest", "endingOffsets": '{"/stream/a": 50, "/stream/b": -1}'},
            {"/stream/a": Start("first"), "/stream/b": Start("first")},
            {"/stream/a": End("offset", 50), "/stream/b": End("latest")},
        ),
        (
            {"startingTimestamp": "1700000000500", "endingTimestamp": "1700000060000"},
            {
                "/stream/a": Start("timestamp", 1700000000.5),
                "/stream/b": Start("timestamp", 1700000000.5),
            },
            {"/stream/a": End("timestamp", 1700000060), "/stream/b": End("timestamp", 1700000060)},
        ),
        (
            {
                "startingOffsetsByTimestamp": '{"/stream/a": {"0": 1000}, "/stream/b": 2000}',
                "endingOffsetsByTimestamp": '{"/stream/a": 3000, "/stream/b": {"0": 4000}}',
            },
            {"/stream/a": Start("timestamp", 1.0), "/stream/b": Start("timestamp", 2.0)},
            {"/stream/a": End("timestamp", 3.0), "/stream/b": End("timestamp", 4.0)},
        ),
        (
            {"startingOffsets": '{"/stream/a": -1, "/stream/b": 0}'},
            {"/stream/a": Start("next"), "/stream/b": Start("offset", 0)},
            {"/stream/a": End("latest"), "/stream/b": End("latest")},
        ),
    ],
)
def test_kafka_positions_per_stream(
    options: dict[str, str], starting: dict[str, Start], ending: dict[str, End]
) -> None:
    """Kafka's JSON and timestamp forms: a stream is a topic of one partition, "0"."""
    given = read_options({**BASE, **options})
    assert (given.starting, given.ending) == (starting, ending)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"startingOffsets": '{"/stream/a": 1'}, "option startingOffsets is not valid JSON"),
        ({"startingOffsets": "[1, 2]"}, "must be a JSON object of streams"),
        (
            {"startingOffsets": '{"/stream/a": 1, "/stream/b": 2, "/stream/c": 3}'},
            r"names /stream/c, which is not read \(option destination: /stream/a, /stream/b\)",
        ),
        ({"startingOffsets": '{"/stream/a": 1}'}, "gives nothing for /stream/b: name every stream"),
        (
            {"startingOffsets": '{"/stream/a": {"1": 5}, "/stream/b": 0}'},
            "a stream has one partition, \"0\"; /stream/a is given '1'",
        ),
        ({"startingOffsets": '{"/stream/a": "x", "/stream/b": 0}'}, "must be a whole number"),
        ({"startingOffsets": '{"/stream/a": -3, "/stream/b": 0}'}, "-2 \\(earliest\\), -1"),
        ({"endingOffsets": '{"/stream/a": -2, "/stream/b": 0}'}, "an offset or -1 \\(latest\\)"),
        ({"startingTimestamp": "yesterday"}, "startingTimestamp must be milliseconds"),
        (
            {"startingTimestamp": "1", "startingOffsets": "first"},
            "give one of options startingOffsets and startingTimestamp, not both",
        ),
        (
            {"startingOffsets": '{"/stream/a": 9, "/stream/b": 0}', "endingOffsets": "5"},
            r"the start of /stream/a \(9\) is after its end \(5\)",
        ),
    ],
)
def test_a_bad_position_is_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(DataSourceOptionError, match=message):
        read_options({**BASE, **options})


def test_a_batch_does_not_start_at_latest_nor_a_stream_end() -> None:
    """As Kafka's source: latest reads nothing in a batch; a streaming query has no end."""
    with pytest.raises(DataSourceOptionError, match="a batch read cannot start at latest"):
        for_batch(read_options({**BASE, "startingOffsets": "latest"}))
    with pytest.raises(DataSourceOptionError, match="are for batch reads"):
        for_stream(read_options({**BASE, "endingOffsets": "10"}))
    assert for_stream(read_options({**BASE, "startingOffsets": "latest"})).starting


def test_kafka_names_and_any_case_are_taken() -> None:
    """Spark hands options in lower case; Kafka's maxOffsetsPerTrigger means ours."""
    given = read_options(
        {"url": BASE["url"], "destination": "/stream/a", "maxoffsetspertrigger": "7"}
    )
    assert (given.max_per_trigger, given.fail_on_data_loss) == (7, True)
    paced = read_options({**BASE, "minoffsetspertrigger": "100", "maxtriggerdelay": "30s"})
    assert (paced.min_per_trigger, paced.max_trigger_delay) == (100, 30.0)
    assert read_options({**BASE, "minMessagesPerTrigger": "1"}).max_trigger_delay == 15 * 60
    assert (
        read_options(
            {**BASE, "minMessagesPerTrigger": "1", "maxTriggerDelay": "250"}
        ).max_trigger_delay
        == 0.25
    )
    assert not read_options({**BASE, "failondataloss": "False"}).fail_on_data_loss
    written = write_options({"URL": BASE["url"], "checkpointLocation": "/tmp/c", "window": "3"})
    assert written.window == 3


def test_a_bad_write_option_is_named() -> None:
    with pytest.raises(DataSourceOptionError, match="one destination when writing"):
        write_options(BASE)
    with pytest.raises(DataSourceOptionError, match="option onRefused must be fail or log"):
        write_options({"url": BASE["url"], "onRefused": "ignore"})
    with pytest.raises(
        DataSourceOptionError, match="not an option of the stompbroker source when writing"
    ):
        write_options({"url": BASE["url"], "startingOffsets": "first"})


def test_a_range_splits_into_equal_ranges_that_cover_it() -> None:
    parts = split("/stream/a", 10, 21, 4)
    assert [(part.start, part.stop) for part in parts] == [(10, 13), (13, 16), (16, 19), (19, 21)]
    assert split("/stream/a", 5, 5, 4) == []
