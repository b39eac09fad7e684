"""The broker's web resources without a socket: a GET through ``treq.testing.StubTreq``."""

from __future__ import annotations

from typing import Any

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
