"""
A user's sessions acted on by every node: a backend's ``disconnect`` or
``unsubscribe`` of a user reaches this node, which tells the others on the
channel ``PREFIX:users`` (pub/sub): ``{"from": NODE, "action", "login",
"argument"}`` as JSON.  Each node applies what another node published
(:class:`~stompbroker.broker.clients.user_actions.UserActions`) and ignores its
own.  A node that is not connected to Redis when one is published does not get
it: its clients of that user stay (the API's answer counts what this node did).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from stompbroker.logs import logger

__all__ = ["ClusterUserActions"]

log = logger("stompbroker.broker.engine.redis")


class ClusterUserActions:
    """
    This node's side of the channel.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :param apply: applies another node's action here: ``apply(action, login, argument)``.
    """

    def __init__(self, engine: Any, apply: Callable[[str, str, str], None]) -> None:
        self._engine = engine
        self._apply = apply
        self.channel = engine.names.users_channel

    def tell(self, action: str, login: str, argument: str) -> None:
        """Hand an action to the other nodes (through the writer, in order)."""
        writer = self._engine.writer
        if writer is None:
            return
        payload = {"from": self._engine.ids.node, "action": action, "login": login}
        payload["argument"] = argument
        writer.command("PUBLISH", self.channel, json.dumps(payload))

    def notice(self, data: bytes) -> None:
        """Apply another node's action."""
        try:
            payload = json.loads(data)
            node, action = payload["from"], payload["action"]
            login, argument = payload["login"], payload["argument"]
            if not all(isinstance(value, str) for value in (node, action, login, argument)):
                raise ValueError(payload)
        except (ValueError, KeyError, TypeError):
            log.warn("ignored a malformed user action")
            return
        if node != self._engine.ids.node:
            self._apply(action, login, argument)
