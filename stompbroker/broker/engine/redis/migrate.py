"""
Renames the keys an older stompbroker wrote in Redis to the names of
:mod:`.keys` (a queue's keys under one hash tag), for an upgrade across that
change: run it with every node stopped (docs/cluster.md, "Upgrades").

Usage: ``python -m stompbroker.broker.engine.redis.migrate REDIS-URL [--prefix NAME]``
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stompbroker.broker.engine.redis.keys import (
    Keys,
    byte_counter,
    durable_stream,
    groups_key,
    lane_stream,
    lease_key,
    mode_key,
    node_stream,
    queue_stream,
    record_key,
    registry_key,
    returned_stream,
    stream_key,
)

__all__ = ["main", "migrate", "renamed"]

#: The old name of each key of one destination (``PREFIX:KIND:DESTINATION``) -> its new name.
_BY_DESTINATION = {
    "q": queue_stream,
    "qm": mode_key,
    "qc": registry_key,
    "qg": groups_key,
    "ql": lease_key,
    "qret": returned_stream,
    "d": durable_stream,
    "s": stream_key,
}


def renamed(prefix: str, key: str) -> str | None:
    """
    :returns: the new name of a key an older version named ``key``, or ``None``
        for a key whose name did not change (or that is not this broker's).
    """
    head = prefix + ":"
    if not key.startswith(head):
        return None
    kind, _, rest = key[len(head) :].partition(":")
    names = Keys(prefix)
    if kind in _BY_DESTINATION and rest:
        return _BY_DESTINATION[kind](prefix, rest)
    if kind == "qp":
        priority, _, destination = rest.partition(":")
        return lane_stream(prefix, destination, int(priority)) if priority.isdigit() else None
    if kind == "qn":
        node, _, destination = rest.partition(":")
        return node_stream(prefix, node, destination) if destination else None
    if kind == "qb":
        if rest.endswith(":recounted"):
            return None  # a mark of one second: it expires
        stream = renamed(prefix, head + rest)
        return None if stream is None else byte_counter(stream)
    if kind == "qr":
        node, _, stream = rest.partition(":")
        new = renamed(prefix, stream)
        return None if new is None else record_key(node, new)
    if kind == "sb":
        return names.stream_size(rest)
    old = {
        "sched": names.schedule_due,
        "sched:jobs": names.schedule_jobs,
        "sched:flying": names.schedule_flying,
        "qused": names.expiry_used,
        "qused:tag": names.expiry_tags,
    }
    return old.get(key[len(head) :])


def migrate(client: Any, prefix: str) -> int:
    """
    Rename every old key of ``prefix`` (``RENAMENX``: a key already under its
    new name is left as it is, and so is the old one, to look at).

    :param client: a synchronous redis-py client.
    :returns: how many keys were renamed.
    """
    done = 0
    for raw in list(client.scan_iter(match=prefix + ":*", count=1000)):
        key = raw.decode() if isinstance(raw, bytes) else raw
        new = renamed(prefix, key)
        if new is not None and new != key and client.renamenx(key, new):
            done += 1
    return done


def main(argv: list[str]) -> int:
    """:returns: 0 once the keys are renamed."""
    import redis

    parser = argparse.ArgumentParser(
        prog="python -m stompbroker.broker.engine.redis.migrate", description=__doc__
    )
    parser.add_argument("url", help="the Redis server, as redis://HOST:PORT/DB")
    parser.add_argument("--prefix", default="stompbroker", help="the engine URL's prefix")
    args = parser.parse_args(argv)
    client = redis.Redis.from_url(args.url)
    print(f"renamed {migrate(client, args.prefix)} keys")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
