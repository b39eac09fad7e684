"""
/metrics (stompbroker.stats.metrics) rendered by prometheus_client from a broker
on a clock; no sockets.
"""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from stompbroker.stats.documents import stats_document
from stompbroker.stats.metrics import metrics_registry
from stompbroker.stats.model import StatsModel
from stompbroker.stats.sampling_services import LiveStats
from tests.support.broker import World


def test_each_nodes_foreign_acks_are_in_stats_and_metrics() -> None:
    """
    The acknowledgements a node dropped (another node had taken over their
    messages) show in its /stats nodes entry and as a counter labelled by node.
    """
    world = World()
    model = StatsModel(world.broker, rss=lambda: 1000)
    node = model.node
    assert stats_document(model, None)["nodes"][0]["foreign_acks"] == 0
    world.broker.counters.foreign_acks += 3
    (entry,) = stats_document(model, None)["nodes"]
    assert (entry["node"], entry["foreign_acks"]) == (node, 3)
    text = generate_latest(metrics_registry(LiveStats(model))).decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    family = families["stompbroker_node_foreign_acks"]
    assert family.type == "counter"
    assert [(s.name, s.labels, s.value) for s in family.samples] == [
        ("stompbroker_node_foreign_acks_total", {"node": node}, 3.0)
    ]
