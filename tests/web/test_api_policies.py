"""``/api/policies``: list, set and clear policies at run time, applying at once."""

from __future__ import annotations

from typing import Any

from twisted.logger import formatEvent

from tests.support.api import ORDERS, Api, basic


def test_set_list_get_and_clear_a_policy(log_events: list[dict[str, Any]]) -> None:
    api = Api(auth=True)
    admin = basic("admin")
    body = {"pattern": "orders", "apply-to": "queues", "definition": {"max-length": 1}}
    code, policy, _ = api.call("PUT", "policies/short", body, admin)
    assert code == 200
    assert policy == {
        "name": "short",
        "pattern": "orders",
        "priority": 0,
        "apply-to": "queues",
        "vhost": "/",
        "definition": {"max-length": 1, "overflow": "drop-head"},
    }
    # At once on the existing queue: the next message pushes the oldest out.
    api.broker.publish("/queue/orders", "four")
    assert [m.body for m in api.broker.engine.queues["/queue/orders"].pending] == [b"four"]
    assert api.call("GET", "policies", headers=basic("reader"))[1] == [policy]
    assert api.call("GET", "policies/short", headers=admin)[1] == policy
    _, destinations, _ = api.call("GET", "destinations", headers=admin)
    assert [row["policy"] for row in destinations if row["destination"] == "/queue/orders"] == [
        "short"
    ]
    assert api.call("GET", f"destinations/{ORDERS}", headers=admin)[1]["policy"] == "short"
    assert api.call("DELETE", "policies/short", headers=admin)[:2] == (
        200,
        {"name": "short", "cleared": True},
    )
    assert api.call("GET", "policies", headers=admin)[1] == []
    assert api.call("GET", f"destinations/{ORDERS}", headers=admin)[1]["policy"] is None
    logged = [formatEvent(e) for e in log_events if "policy short" in formatEvent(e)]
    assert logged[0].startswith("admin at 127.0.0.1 set policy short: {")
    assert logged[1] == "admin at 127.0.0.1 cleared policy short"


def test_changing_policies_needs_the_admin_right() -> None:
    api = Api(auth=True)
    code, error, _ = api.call("PUT", "policies/p", {"pattern": "a"}, basic("reader"))
    assert code == 403
    assert api.broker.policies.listed() == []


def test_a_bad_policy_is_a_400_naming_the_key() -> None:
    api = Api(auth=True)
    admin = basic("admin")
    code, error, _ = api.call(
        "PUT", "policies/p", {"pattern": "a", "definition": {"max-length": "x"}}, admin
    )
    assert code == 400 and "max-length takes a whole number" in error["detail"]
    code, error, _ = api.call("PUT", "policies/p", {"pattern": "a", "colour": 1}, admin)
    assert code == 400 and "colour" in error["detail"]
    code, error, _ = api.call("PUT", "policies/p", {"pattern": "a", "definition": []}, admin)
    assert code == 400


def test_an_unknown_policy_is_a_404() -> None:
    api = Api(auth=True)
    assert api.call("GET", "policies/nope", headers=basic("admin"))[0] == 404
    assert api.call("DELETE", "policies/nope", headers=basic("admin"))[0] == 404
