"""
The redis engine's Lua scripts as files (stompbroker.broker.engine.redis.scripts):
each one loads with its includes spliced in and compiles in a real Redis, and runs
one way, ``EVALSHA``, with ``EVAL`` where the server may lack it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from stompbroker.broker.engine.redis.codec import ENTRY_BODY_LENGTH
from stompbroker.broker.engine.redis.scripts import LoadedScripts, Script, load, run_script, splice
from tests.support.redis import RedisServer, redis_server  # noqa: F401

LUA = Path(__file__).parents[3] / "stompbroker" / "broker" / "engine" / "redis" / "lua"
SCRIPTS = sorted(path.stem for path in LUA.glob("*.lua"))
INCLUDES = sorted(path.stem for path in (LUA / "includes").glob("*.lua"))


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:  # noqa: F811
    connection = redis.Redis(port=redis_server.port)
    connection.flushdb()
    connection.script_flush()
    yield connection
    connection.close()


def test_the_package_has_its_scripts_and_includes() -> None:
    assert "settle" in SCRIPTS and "body_size" in INCLUDES


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_loads_with_its_includes_and_names_its_keys(name: str) -> None:
    """No include line is left; the header says what KEYS and ARGV are (or that there are none)."""
    script = load(name)
    assert "@include" not in script
    assert script.name == name and len(script.sha) == 40
    assert script.startswith("--"), "a script starts with what it takes and answers"


@pytest.mark.integration
@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_compiles_in_redis(client: redis.Redis, name: str) -> None:
    """``SCRIPT LOAD`` compiles it (a syntax error, or an include twice, is refused)."""
    script = load(name)
    assert client.script_load(script) == script.sha


def test_every_include_is_used_by_a_script() -> None:
    used = {
        include
        for path in LUA.rglob("*.lua")
        for include in re.findall(r'^--- @include "([a-z_]+)"$', path.read_text(), re.MULTILINE)
    }
    assert used == set(INCLUDES)


def test_an_include_is_spliced_in_once() -> None:
    """Two pieces that need a third get it once: a second ``local function`` would shadow it."""
    text = splice('--- @include "body_size"\n--- @include "body_size"\nreturn 1\n')
    assert text.count("local function body_size") == 1


def test_the_body_size_include_reads_a_binary_entry_where_the_codec_writes_its_length() -> None:
    assert f"from + {ENTRY_BODY_LENGTH}))" in splice('--- @include "body_size"\n')


@pytest.mark.integration
def test_a_script_runs_by_its_sha_and_again_after_the_server_forgot_it(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """``NOSCRIPT`` (a restarted Redis) makes run_script send the text, once."""
    script = Script("echo", "return ARGV[1]")

    async def twice() -> list[bytes]:
        client = aioredis.Redis(port=redis_server.port)
        await client.script_flush()
        first = await run_script(client, script, 0, "a")
        cached = await client.script_exists(script.sha)
        second = await run_script(client, script, 0, "b")
        await client.aclose()
        return [first, cached, second]

    assert asyncio.run(twice()) == [b"a", [True], b"b"]


def test_the_writer_sends_a_scripts_text_until_an_eval_of_it_was_answered() -> None:
    """First use on a connection: ``EVAL``; once answered, ``EVALSHA``; a reconnection forgets."""
    script = Script("echo", "return ARGV[1]")
    loaded = LoadedScripts()
    pipeline = [("EVALSHA", script, 0, "a"), ("GET", "k"), ("EVALSHA", script, 0, "b")]
    first = loaded.commands(pipeline)
    assert [args[:2] for args in first] == [
        ("EVAL", str(script)),
        ("GET", "k"),
        ("EVAL", str(script)),
    ]
    loaded.answered([b"a", None, b"b"])
    assert loaded.commands(pipeline)[0][:2] == ("EVALSHA", script.sha)
    loaded.forget(connection=None)
    assert loaded.commands(pipeline)[0][:2] == ("EVAL", str(script))


def test_an_eval_refused_leaves_the_script_to_be_sent_again() -> None:
    """An ``EVAL`` answered with an error (Redis full, say) may not have cached the script."""
    script = Script("echo", "return ARGV[1]")
    loaded = LoadedScripts()
    loaded.commands([("EVALSHA", script, 0, "a")])
    loaded.answered([redis.ResponseError("OOM command not allowed")])
    assert loaded.commands([("EVALSHA", script, 0, "a")])[0][0] == "EVAL"


@pytest.mark.integration
def test_a_lease_is_taken_renewed_kept_from_others_and_let_go_by_its_holder_only(
    client: redis.Redis,
) -> None:
    take, resign = load("take_lease"), load("resign_lease")
    assert client.eval(take, 1, "sb:lease", "a", 10_000) == 1
    assert client.eval(take, 1, "sb:lease", "b", 10_000) == 0
    assert client.eval(take, 1, "sb:lease", "a", 20_000) == 1
    assert client.pttl("sb:lease") > 10_000
    client.eval(resign, 1, "sb:lease", "b")
    assert client.get("sb:lease") == b"a"
    client.eval(resign, 1, "sb:lease", "a")
    assert client.get("sb:lease") is None


@pytest.mark.integration
def test_a_policy_change_is_stored_and_announced_on_the_channel_given_in_argv(
    client: redis.Redis,
) -> None:
    """A channel is no key: it comes in ARGV (Redis Cluster routes a script by its KEYS)."""
    pubsub = client.pubsub()
    pubsub.subscribe("sb:policies:changes")
    pubsub.get_message(timeout=1)
    client.eval(load("change_policy"), 1, "sb:policies", "sb:policies:changes", "p", "{}", "n")
    assert client.hget("sb:policies", "p") == b"{}"
    assert pubsub.get_message(timeout=1)["data"] == b"n"
    pubsub.close()


@pytest.mark.integration
def test_a_retained_message_is_numbered_stored_and_removed(client: redis.Redis) -> None:
    retain, unretain = load("retain"), load("unretain")
    assert client.eval(retain, 1, "sb:retained", "sb:retained:changes", "/topic/a", "m1") == 1
    assert client.eval(retain, 1, "sb:retained", "sb:retained:changes", "/topic/a", "m2") == 2
    assert client.hget("sb:retained", "/topic/a") == b"2\nm2"
    client.eval(unretain, 1, "sb:retained", "sb:retained:changes", "/topic/a", "")
    assert client.hkeys("sb:retained") == [b"#seq"]


@pytest.mark.integration
def test_a_dead_nodes_consumers_and_groups_are_forgotten_and_the_version_moves(
    client: redis.Redis,
) -> None:
    registry, mode, groups = (
        "sb:{q:/queue/a}:consumers",
        "sb:{q:/queue/a}:mode",
        "sb:{q:/queue/a}:groups",
    )
    client.hset(registry, mapping={"dead/1": "[]", "dead/2": "[]", "live/1": "[]"})
    client.hset(groups, mapping={"g1": "dead/1", "g2": "live/1"})
    client.hset(mode, mapping={"v": 3, "r:dead": "x"})
    assert client.eval(load("forget_node_consumers"), 3, registry, mode, groups, "dead") == 2
    assert client.hkeys(registry) == [b"live/1"]
    assert client.hgetall(groups) == {b"g2": b"live/1"}
    assert client.hgetall(mode) == {b"v": b"4"}


@pytest.mark.integration
def test_a_session_record_is_taken_once_by_login_and_version_and_dead_hashes_forgotten(
    client: redis.Redis,
) -> None:
    take = load("take_session")
    record = '{"login": "u", "version": "1.2"}'
    client.sadd("sb:resume:nodes", "n1", "gone")
    client.hset("sb:resume:n1", "token", record)
    client.set("sb:alive:n1", "1")
    args = ("sb:resume:", "sb:alive:")
    assert client.eval(take, 1, "sb:resume:nodes", "token", "other", "1.2", *args) is None
    assert client.hexists("sb:resume:n1", "token"), "another login takes nothing"
    taken = client.eval(take, 1, "sb:resume:nodes", "token", "u", "1.2", *args)
    assert taken == [b"n1", record.encode(), 1]
    assert client.eval(take, 1, "sb:resume:nodes", "token", "u", "1.2", *args) is None
    assert client.smembers("sb:resume:nodes") == {b"n1"}
