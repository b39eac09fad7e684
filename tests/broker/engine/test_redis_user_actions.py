"""
A backend's actions on a user between redis nodes
(:mod:`stompbroker.broker.engine.redis.user_actions`), without Redis: what is
published, what another node's notice does, and notices that are ignored.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from stompbroker.broker.engine.redis.keys import Keys
from stompbroker.broker.engine.redis.user_actions import ClusterUserActions


class Writer:
    def __init__(self) -> None:
        self.commands: list[tuple[Any, ...]] = []

    def command(self, *args: Any) -> None:
        self.commands.append(args)


class FakeEngine:
    def __init__(self, node: str) -> None:
        self.names = Keys("sb")
        self.writer = Writer()
        self.ids = type("Ids", (), {"node": node})()


def test_an_action_is_published_and_another_nodes_is_applied_here() -> None:
    applied: list[tuple[str, str, str]] = []
    engine = FakeEngine("n1")
    here = ClusterUserActions(engine, lambda *action: applied.append(action))
    here.tell("unsubscribe", "bob", "/topic/room\nkicked")
    [(command, channel, payload)] = engine.writer.commands
    assert (command, channel) == ("PUBLISH", "sb:users")
    there = ClusterUserActions(FakeEngine("n2"), lambda *action: applied.append(action))
    there.notice(payload.encode())
    assert applied == [("unsubscribe", "bob", "/topic/room\nkicked")]
    here.notice(payload.encode())  # its own: already done here
    assert len(applied) == 1


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[]",
        json.dumps({"from": "n2", "action": "disconnect", "login": "bob"}).encode(),
        json.dumps({"from": "n2", "action": "disconnect", "login": 7, "argument": ""}).encode(),
    ],
)
def test_a_malformed_notice_is_ignored(data: bytes) -> None:
    applied: list[Any] = []
    ClusterUserActions(FakeEngine("n1"), lambda *action: applied.append(action)).notice(data)
    assert applied == []
