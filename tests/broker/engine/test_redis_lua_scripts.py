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
