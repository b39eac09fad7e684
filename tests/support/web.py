"""The broker's web resources without a socket: a GET through ``treq.testing.StubTreq``."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from treq.testing import StubTreq


def get(treq: StubTreq, url: str) -> tuple[Any, bytes]:
    """:returns: the response to a GET and its body, with every Deferred already fired."""
    responses: list[Any] = []
    treq.get(url).addCallback(responses.append)
    treq.flush()
    [response] = responses
    bodies: list[bytes] = []
    treq.content(response).addCallback(bodies.append)
    treq.flush()
    return response, bodies[0]


def metric_samples(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """:returns: every sample of a Prometheus exposition, by name and sorted labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode("utf-8"))
        for sample in family.samples
    }
