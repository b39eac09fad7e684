"""The flow counters' names: one list for the broker that counts and the export that writes."""

from __future__ import annotations

import attrs

from stompbroker.broker.flow.counter_names import FLOW_COUNTERS
from stompbroker.broker.flow.traffic import DestinationTraffic
from stompbroker.stats.schema import DestinationRecord


def test_the_export_record_has_a_field_per_flow_counter_in_order() -> None:
    """The destination record's messages_* and bytes_* fields are the flow counters, in order."""
    fields = [attribute.name for attribute in attrs.fields(DestinationRecord)]
    assert [name for name in fields if name.startswith(("messages_", "bytes_"))] == list(
        FLOW_COUNTERS
    )


def test_destination_traffic_totals_follow_the_counter_names() -> None:
    """DestinationTraffic.totals() reads its counters in FLOW_COUNTERS order."""
    traffic = DestinationTraffic()
    for value, name in enumerate(FLOW_COUNTERS, start=1):
        setattr(traffic, name, value)
    assert traffic.totals() == tuple(range(1, len(FLOW_COUNTERS) + 1))
