"""
The per-destination policies operators set and clear at run time, shared by
every node of a redis engine (docs/policies.md, docs/cluster.md).

- ``PREFIX:policies`` (hash): policy name -> the policy as JSON (as
  ``GET /api/policies`` shows it), or :data:`CLEARED` for a policy cleared at
  run time, so that a node starting later does not bring back one its
  configuration file names;
- ``PREFIX:policies:changes`` (channel): every set and clear, as ``s`` then the
  policy's JSON or ``c`` then its name.

The configuration file's policies stay each node's own (the file is the same on
every node); what is in the hash applies over them, on every node, from its
start.  One script writes the hash and publishes the change, so that the nodes
apply the changes in the order Redis ran them.
"""

from __future__ import annotations

import json
from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.engine.redis.scripts import load
from stompbroker.broker.features.policies import BadPolicy, Policies, Policy, parse_policy
from stompbroker.logs import logger

__all__ = ["CLEARED", "SharedPolicies"]

log = logger("stompbroker.broker.engine.redis")

#: The value of a cleared policy's field.
CLEARED = b"-"

#: lua/change_policy.lua (what it takes and answers is said there).
CHANGE = load("change_policy")


class SharedPolicies:
    """
    Shares ``policies``' run-time changes through Redis, and applies the other
    nodes' (the :class:`~stompbroker.broker.features.policies.PolicySharing` of
    the redis engine).

    :param engine: the redis engine (``names``, ``writer``).
    :param policies: this node's policies.
    """

    def __init__(self, engine: Any, policies: Policies) -> None:
        self._engine = engine
        self._policies = policies
        self.hash = engine.names.policies
        self.channel = engine.names.policies_channel

    def policy_set(self, policy: Policy) -> None:
        """An operator set ``policy`` here: store it and tell every node."""
        document = json.dumps(policy.as_dict(), sort_keys=True)
        self._write(policy.name, document.encode(), b"s" + document.encode())

    def policy_cleared(self, name: str) -> None:
        """An operator cleared the policy ``name`` here: mark it cleared and tell every node."""
        self._write(name, CLEARED, b"c" + name.encode())

    def _write(self, name: str, value: bytes, notice: bytes) -> None:
        self._engine.writer.command(
            "EVALSHA", CHANGE, 1, self.hash, self.channel, name, value, notice
        )

    def notice(self, payload: bytes) -> None:
        """Apply a set or clear of any node (this one's again, which changes nothing)."""
        if payload[:1] == b"c":
            self._policies.remove(payload[1:].decode(), announce=False)
            return
        policy = _parsed(payload[1:])
        if policy is not None:
            self._policies.set(policy, announce=False)

    def load(self) -> Deferred[None]:
        """Apply what the hash holds over this node's policies (when the node starts)."""
        read: Deferred[Any] = self._engine.writer.command_waited("HGETALL", self.hash)
        return read.addCallback(self._loaded)

    def _loaded(self, reply: Any) -> None:
        if isinstance(reply, list):
            reply = dict(zip(reply[::2], reply[1::2], strict=True))
        for field, value in sorted(reply.items()):
            if value == CLEARED:
                self._policies.remove(field.decode(), announce=False)
                continue
            policy = _parsed(value)
            if policy is not None:
                self._policies.set(policy, announce=False)


def _parsed(document: bytes) -> Policy | None:
    """:returns: the policy a JSON document states, or ``None`` (logged) if it is malformed."""
    try:
        values = json.loads(document)
        name = values.pop("name")
        definition = values.pop("definition", {})
        return parse_policy(name, {**values, **definition})
    except (ValueError, KeyError, TypeError, AttributeError, BadPolicy) as error:
        log.warn("ignored a malformed shared policy from Redis: {error}", error=str(error))
        return None
