"""The ``stompbroker`` data source's options: what they become, and the errors that name them."""

from __future__ import annotations

import pytest

from sparkjobs.datasource.options import DataSourceOptionError, read_options, write_options
from sparkjobs.datasource.reading import split

BASE = {"url": "stomp://127.0.0.1:61613", "destination": "/stream/a, /stream/b"}


def test_defaults_and_given_values() -> None:
    options = read_options(BASE)
    assert options.destinations == ("/stream/a", "/stream/b")
    assert (options.starting.kind, options.ending, options.max_per_trigger) == ("first", None, None)
    given = read_options(
        {
            **BASE,
            "startingOffsets": "timestamp=1700000000.5",
            "endingOffsets": "40",
            "maxMessagesPerTrigger": "500",
            "headerColumns": "region, priority:INT",
        }
    )
    assert given.starting.header() == "timestamp=1700000000.5"
    assert (given.ending, given.max_per_trigger) == (40, 500)
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
            r"\(50\) is after endingOffsets",
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
