"""
Process limits the broker needs raised before it listens: open file descriptors,
one per client connection and a few more.
"""

from __future__ import annotations

import resource

from stompbroker.logs import logger

__all__ = ["SPARE_DESCRIPTORS", "raise_descriptor_limit"]

log = logger("stompbroker.app.process_limits")

#: Files the broker may need open besides its client connections.
SPARE_DESCRIPTORS = 256


def raise_descriptor_limit(connections: int) -> int:
    """
    Let the process open enough files for ``connections`` clients, up to the hard limit.

    :param connections: the most client connections; 0 means as many as allowed.
    :returns: the soft limit now in force.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if not connections else connections + SPARE_DESCRIPTORS
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if soft != resource.RLIM_INFINITY and wanted > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        soft = wanted
    if connections and soft != resource.RLIM_INFINITY and soft < connections + SPARE_DESCRIPTORS:
        log.warn(
            "the process may open {limit} files: fewer than --max-connections {connections}"
            " will fit",
            limit=soft,
            connections=connections,
        )
    return soft
