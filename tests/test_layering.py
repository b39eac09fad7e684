"""
The layer rules of ARCHITECTURE.md, each a test that fails when broken.

The packages form a stack; a module may import from its own package, from the
packages below it, and from the two shared modules at the top
(:mod:`stompbroker.interfaces` and :mod:`stompbroker.logs`), never from a package
above it::

    protocol  <  broker  <  security  <  transport  <  stats  <  web  <  app

The checks read the source with :mod:`ast` instead of importing it, so they see
every import, including those inside functions or behind ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import stompbroker
from tests.support.layers import LAYERS

PACKAGE = Path(stompbroker.__file__).parent
ROOT = PACKAGE.parent


#: Modules at the top of the package that every layer may import.
SHARED = ("interfaces", "logs")

#: Third-party packages each layer must not import.
FORBIDDEN_LIBRARIES = {
    "protocol": ("twisted", "autobahn", "redis"),
    "broker": ("autobahn",),
    "security": ("autobahn",),
    "stats": ("autobahn",),
}

#: Built-ins that read or write an object's attributes by name.
ATTRIBUTE_FISHING = ("getattr", "setattr", "hasattr")


def imports_of(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """
    :returns: ``(line, module)`` for each absolute import in ``source``; a relative
        import is reported as ``.``-prefixed so that it is never mistaken for another
        package.
    """
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                prefix = "." * node.level + (f"{module}." if module else "")
                found.extend((node.lineno, prefix + alias.name) for alias in node.names)
            elif module == "stompbroker":
                found.extend((node.lineno, f"stompbroker.{alias.name}") for alias in node.names)
            else:
                found.append((node.lineno, module))
    return sorted(found)


def modules_of(layer: str) -> Iterator[Path]:
    """:returns: every module of one layer's package."""
    paths = sorted((PACKAGE / layer).rglob("*.py"))
    assert paths, f"no modules under {PACKAGE / layer}"
    return iter(paths)


def layer_of(module: str) -> str | None:
    """:returns: the layer a ``stompbroker.*`` module belongs to, or ``None``."""
    parts = module.split(".")
    if parts[0] != "stompbroker" or len(parts) < 2:
        return None
    return parts[1]


def upward_imports(layer: str) -> dict[str, list[str]]:
    """:returns: per module of ``layer``, its imports of layers above it or of unknown ones."""
    allowed = set(LAYERS[: LAYERS.index(layer) + 1]) | set(SHARED) | {"__version__"}
    violations = {}
    for path in modules_of(layer):
        bad = [
            f"{line}: {module}"
            for line, module in imports_of(path.read_text(encoding="utf-8"), str(path))
            if module.startswith(".")
            or (layer_of(module) is not None and layer_of(module) not in allowed)
        ]
        if bad:
            violations[str(path.relative_to(PACKAGE))] = bad
    return violations


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_imports_only_from_the_layers_below_it(layer: str) -> None:
    """
    No module imports from a layer above its own, and none imports relatively
    (ARCHITECTURE.md, "Layer rules"; broker/ imports nothing from transport/, web/
    or app/).
    """
    assert upward_imports(layer) == {}


@pytest.mark.parametrize("layer", sorted(FORBIDDEN_LIBRARIES))
def test_a_layer_imports_none_of_its_forbidden_libraries(layer: str) -> None:
    """
    protocol/ imports no Twisted, Autobahn or Redis; no layer below transport/ imports Autobahn.
    """
    forbidden = FORBIDDEN_LIBRARIES[layer]
    violations = {}
    for path in modules_of(layer):
        bad = [
            f"{line}: {module}"
            for line, module in imports_of(path.read_text(encoding="utf-8"), str(path))
            if module.split(".")[0] in forbidden
        ]
        if bad:
            violations[str(path.relative_to(PACKAGE))] = bad
    assert violations == {}


def test_nothing_outside_the_app_imports_it() -> None:
    """app/ only wires: the layers import nothing from it (ARCHITECTURE.md, "app/ only wires")."""
    violations = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.is_relative_to(PACKAGE / "app"):
            continue
        bad = [
            f"{line}: {module}"
            for line, module in imports_of(path.read_text(encoding="utf-8"), str(path))
            if layer_of(module) == "app"
        ]
        if bad:
            violations[str(path.relative_to(PACKAGE))] = bad
    assert violations == {}


def attribute_fishing(source: str, filename: str = "<source>") -> list[str]:
    """:returns: ``"line: name"`` for each call of getattr, setattr or hasattr in ``source``."""
    return [
        f"{node.lineno}: {node.func.id}"
        for node in ast.walk(ast.parse(source, filename))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ATTRIBUTE_FISHING
    ]


def test_stats_read_the_broker_through_methods() -> None:
    """
    stats/ never reaches into the broker or a session with getattr (ARCHITECTURE.md:
    "stats/ reads the broker through methods").
    """
    violations = {
        str(path.relative_to(PACKAGE)): found
        for path in modules_of("stats")
        if (found := attribute_fishing(path.read_text(encoding="utf-8"), str(path)))
    }
    assert violations == {}


def test_the_broker_delivers_to_subscribers_only_through_their_interface() -> None:
    """
    broker/ (engines included) never imports the session or a transport, so the only
    way it reaches a subscriber is ISubscriber (ARCHITECTURE.md: "engines deliver to
    local subscribers only through ISubscriber").
    """
    violations = {}
    for path in modules_of("broker"):
        bad = [
            f"{line}: {module}"
            for line, module in imports_of(path.read_text(encoding="utf-8"), str(path))
            if module.startswith(("stompbroker.protocol.session", "stompbroker.transport"))
        ]
        if bad:
            violations[str(path.relative_to(PACKAGE))] = bad
    assert violations == {}


#: The engines and the queues they hand out, which only broker/engine/ may name
#: (and broker/queueing/, where the local queue and its parts live).
CONCRETE_ENGINE_CLASSES = frozenset({"LocalEngine", "RedisEngine", "WorkerQueue", "StreamQueue"})
#: Where the engine classes may be named: the engines' room, whose one
#: ``factory.py`` builds them from ``--engine``, and the local queue's room.
ENGINE_ROOMS = ("broker/engine/", "broker/queueing/")


def concrete_names(source: str, filename: str = "<source>") -> list[str]:
    """
    :returns: ``"line: name"`` for each use of a concrete engine or queue class in
        ``source`` (a name, an attribute, an imported name), docstrings aside.
    """
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.alias):
            name = node.name.rpartition(".")[2]
        else:
            continue
        if name in CONCRETE_ENGINE_CLASSES:
            found.append(f"{node.lineno}: {name}")
    return found


def test_only_the_engines_name_a_concrete_engine_or_queue() -> None:
    """
    Outside broker/engine/ the code reaches engines and queues through IEngine and
    IQueue and the engine's capabilities, never a concrete class (ARCHITECTURE.md,
    "Engines"); broker/engine/factory.py is the one place that builds them.
    """
    violations = {}
    for layer in LAYERS:
        for path in modules_of(layer):
            where = path.relative_to(PACKAGE).as_posix()
            if where.startswith(ENGINE_ROOMS):
                continue
            found = concrete_names(path.read_text(encoding="utf-8"), str(path))
            if found:
                violations[where] = found
    assert violations == {}


def test_concrete_names_are_seen() -> None:
    """The check sees a class named, reached as an attribute, or imported; not in a docstring."""
    source = (
        '"""A LocalEngine."""\n'
        "from stompbroker.broker.engine.local import LocalEngine\n"
        "isinstance(x, queues.WorkerQueue)\n"
        "RedisEngine()\n"
    )
    assert concrete_names(source) == ["2: LocalEngine", "3: WorkerQueue", "4: RedisEngine"]


@pytest.mark.integration
def test_the_stats_schema_loads_without_twisted() -> None:
    """
    sparkjobs import stompbroker.stats.schema on a Spark driver: it loads no Twisted
    or Autobahn, and of the broker only the Twisted-free counter names it shares.
    """
    program = (
        "import sys, stompbroker.stats.schema\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('twisted', 'autobahn')"
        " or m.startswith('stompbroker.')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == str(
        [
            "stompbroker.broker",
            "stompbroker.broker.flow",
            "stompbroker.broker.flow.counter_names",
            "stompbroker.stats",
            "stompbroker.stats.schema",
        ]
    )


def test_import_check_sees_every_form_of_import() -> None:
    """
    The check catches plain, dotted, from-, package-root and nested imports, and relative ones.
    """
    source = (
        "import os, twisted.internet\n"
        "from autobahn.twisted import websocket\n"
        "def f():\n"
        "    from stompbroker.web import site\n"
        "from stompbroker import app\n"
        "from . import frames\n"
    )
    assert imports_of(source) == [
        (1, "os"),
        (1, "twisted.internet"),
        (2, "autobahn.twisted"),
        (4, "stompbroker.web"),
        (5, "stompbroker.app"),
        (6, ".frames"),
    ]


def test_attribute_fishing_is_seen() -> None:
    """The stats check catches getattr, setattr and hasattr calls, not attribute access."""
    source = "x = getattr(a, 'b')\nsetattr(a, 'b', 1)\nhasattr(a, 'c')\ny = a.getattr\n"
    assert attribute_fishing(source) == ["1: getattr", "2: setattr", "3: hasattr"]


def imported_names(node: ast.AST) -> list[str]:
    """
    :returns: what an absolute import statement names: each module, and for
        ``from M import a`` both ``M`` and ``M.a`` (``a`` may be a module);
        nothing for any other node.
    """
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level:
        module = node.module or ""
        return [module] + [f"{module}.{alias.name}" for alias in node.names]
    return []


def imported_test_modules(source: str) -> list[str]:
    """:returns: each test module (``tests.*.test_*``) that ``source`` imports, or imports from."""
    found = []
    for node in ast.walk(ast.parse(source)):
        modules = imported_names(node)
        found.extend(
            module
            for module in modules
            if module.startswith("tests.") and module.rsplit(".", 1)[-1].startswith("test_")
        )
    return found


def test_no_test_module_imports_another() -> None:
    """Helpers that several test modules share live in tests/support/, not in a test module."""
    violations = {
        str(path.relative_to(ROOT)): imported_test_modules(path.read_text())
        for path in sorted((ROOT / "tests").rglob("*.py"))
    }
    assert {path: found for path, found in violations.items() if found} == {}


def test_test_module_imports_are_seen() -> None:
    """The check catches a test module imported whole, from its package, or a name from it."""
    source = (
        "import tests.broker.queueing.test_queues\n"
        "from tests.broker import test_service_delivery as delivery\n"
        "from tests.broker.test_session_flows import Client\n"
        "from tests.support.broker import World\n"
    )
    assert imported_test_modules(source) == [
        "tests.broker.queueing.test_queues",
        "tests.broker.test_service_delivery",
        "tests.broker.test_session_flows",
    ]


# -- the session's parts ---------------------------------------------------------


def session_parts(source: str) -> set[str]:
    """
    :returns: the attributes through which the session holds its parts: those
        its ``__init__`` sets to a new object (``self.receipts = Receipts(...)``),
        and ``_session``, through which each part holds the session.
    """
    parts = {"_session"}
    for function in ast.walk(ast.parse(source)):
        if not (isinstance(function, ast.FunctionDef) and function.name == "__init__"):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            else:
                continue
            made = node.value.func if isinstance(node.value, ast.Call) else None
            if isinstance(made, ast.Name) and made.id[:1].isupper():
                parts.update(
                    target.attr
                    for target in targets
                    if isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                )
    return parts


def _assigned(target: ast.expr) -> Iterator[ast.expr]:
    """:returns: each single target of an assignment (tuples unpacked)."""
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _assigned(element)
    elif isinstance(target, ast.Starred):
        yield from _assigned(target.value)
    else:
        yield target


def writes_to_another_part(source: str, parts: set[str]) -> list[str]:
    """
    :returns: ``"LINE: TARGET"`` for each assignment, in ``source``, to an
        attribute of an object reached through another object: a part's state
        written by the session or by another part (``self.receipts.held = x``,
        ``self._session.frames_sent += 1``), directly or through a local name
        bound to a part (``receipts = self.receipts; receipts.held = x``).  A
        part writes only its own attributes, and asks the owner of any other
        state through a method.
    """
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        aliases = {
            name.id
            for node in ast.walk(function)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr in parts
            for target in node.targets
            for name in _assigned(target)
            if isinstance(name, ast.Name)
        }
        for node in ast.walk(function):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            else:
                continue
            for target in targets:
                for one in _assigned(target):
                    if not isinstance(one, ast.Attribute):
                        continue
                    holder = one.value
                    if isinstance(holder, ast.Attribute) or (
                        isinstance(holder, ast.Name) and holder.id in aliases
                    ):
                        found.append(f"{node.lineno}: {ast.unparse(one)}")
    return found


def test_no_part_of_the_session_writes_another_parts_state() -> None:
    """
    STYLE.md 12: the session holds its parts (receipts, timers, output,
    subscriptions, login, resume) and no part, nor the session, writes another's
    state; each asks through a method of the owner.
    """
    protocol = PACKAGE / "protocol"
    parts = session_parts((protocol / "session.py").read_text())
    assert {"receipts", "timers", "output", "subscriptions", "login", "resume"} <= parts
    violations = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(protocol.rglob("*.py"))
        if (found := writes_to_another_part(path.read_text(), parts))
    }
    assert violations == {}
    # The session holds its parts; it inherits none of them.
    tree = ast.parse((protocol / "session.py").read_text())
    (session,) = [
        node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "StompSession"
    ]
    assert session.bases == []


def test_writes_to_another_parts_state_are_seen() -> None:
    """The check sees a write through a chain, through an alias of a part, and in a tuple."""
    source = (
        "class Part:\n"
        "    def __init__(self, session):\n"
        "        self._session = session\n"
        "        self.held = None\n"
        "    def close(self):\n"
        "        self._session.receipts.held = None\n"
        "        receipts = self._session.receipts\n"
        "        receipts.held_bytes += 1\n"
        "        self._session.state, self.held = 1, 2\n"
        "        backlog = self.backlog\n"
        "        backlog.full = True\n"
    )
    assert writes_to_another_part(source, {"_session", "receipts"}) == [
        "6: self._session.receipts.held",
        "8: receipts.held_bytes",
        "9: self._session.state",
    ]
    session = (
        "class S:\n"
        "    def __init__(self):\n"
        "        self.timers = Timers(self)\n"
        "        self.output: Output = Output(self)\n"
        "        self.count = 0\n"
    )
    assert session_parts(session) == {"_session", "timers", "output"}


#: The session's module, which alone holds and sequences its parts.
SESSION_MODULE = "stompbroker.protocol.session"


def session_imports(source: str, filename: str = "<source>") -> list[str]:
    """
    :returns: ``"LINE: MODULE"`` for each import of the session's module in
        ``source``, in any form (``import``, ``from ... import``, the module
        taken from its package), behind ``TYPE_CHECKING`` or not.
    """
    lines = set()
    for node in ast.walk(ast.parse(source, filename)):
        names = imported_names(node)
        if any(name == SESSION_MODULE or name.startswith(SESSION_MODULE + ".") for name in names):
            lines.add(node.lineno)
    return [f"{line}: {SESSION_MODULE}" for line in sorted(lines)]


def test_no_part_imports_the_session() -> None:
    """
    STYLE.md 14: a part does not know its owner.  No module of protocol/ but
    session.py imports session.py, so no part can name the session, and the
    session's modules form no circle.
    """
    protocol = PACKAGE / "protocol"
    violations = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(protocol.rglob("*.py"))
        if path != protocol / "session.py"
        and (found := session_imports(path.read_text(encoding="utf-8"), str(path)))
    }
    assert violations == {}


def test_imports_of_the_session_are_seen() -> None:
    """The check sees the session imported whole, by name, from its package, or for typing."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from stompbroker.protocol.session import StompSession\n"
        "import stompbroker.protocol.session as session_module\n"
        "if TYPE_CHECKING:\n"
        "    from stompbroker.protocol import session\n"
        "from stompbroker.protocol import states\n"
        "from stompbroker.protocol.sessions_elsewhere import x\n"
    )
    assert session_imports(source) == [
        "2: stompbroker.protocol.session",
        "3: stompbroker.protocol.session",
        "5: stompbroker.protocol.session",
    ]


def session_attributes(source: str) -> set[str]:
    """:returns: every attribute a ``StompSession`` has: the names of its ``__slots__``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == "StompSession":
            for statement in node.body:
                if (
                    isinstance(statement, ast.Assign)
                    and isinstance(statement.targets[0], ast.Name)
                    and statement.targets[0].id == "__slots__"
                ):
                    return set(ast.literal_eval(statement.value))
    raise AssertionError("StompSession declares no __slots__")


def writes_of_session_attributes(source: str, attributes: set[str]) -> list[str]:
    """
    :returns: ``"LINE: TARGET"`` for each write, in ``source``, of an attribute
        named as one of the session's, through anything but ``self``: a
        parameter or local of any name (``session.version = v`` in a function
        given the session, ``s.heartbeat += 1``), a chain
        (``self._session.config = c``), or ``setattr`` with that name.  An
        object writes its own attributes through ``self`` only, whatever they
        are called.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in attributes
            and not (isinstance(node.args[0], ast.Name) and node.args[0].id == "self")
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
            continue
        else:
            continue
        for target in targets:
            for one in _assigned(target):
                if (
                    isinstance(one, ast.Attribute)
                    and one.attr in attributes
                    and not (isinstance(one.value, ast.Name) and one.value.id == "self")
                ):
                    found.append(f"{node.lineno}: {ast.unparse(one)}")
    return found


def test_nothing_outside_the_session_writes_its_attributes() -> None:
    """
    STYLE.md 14: only the session's own methods write its state.  Outside
    protocol/session.py no function writes an attribute named as one of the
    session's through any name but ``self`` (a function that takes the session
    is a mixin in disguise).
    """
    session = PACKAGE / "protocol" / "session.py"
    attributes = session_attributes(session.read_text(encoding="utf-8"))
    assert {"version", "heartbeat", "client_id", "broker", "config", "_parser"} <= attributes
    violations = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != session
        and (found := writes_of_session_attributes(path.read_text(encoding="utf-8"), attributes))
    }
    assert violations == {}


def test_writes_of_session_attributes_are_seen() -> None:
    """
    The check sees a write through a parameter of any name, an augmented or
    unpacked one, a chain and ``setattr``; not an object's write of its own.
    """
    source = (
        "def on_connect(session, frame):\n"
        "    session.version = frame.get('accept-version')\n"
        "def beat(s):\n"
        "    s.heartbeat, other = (0, 0), 1\n"
        "    s.frames_received += 1\n"
        "def name(connection):\n"
        "    setattr(connection, 'client_id', 'x')\n"
        "class Part:\n"
        "    def __init__(self, session):\n"
        "        self.version = '1.0'\n"
        "        self._session = session\n"
        "    def use(self, config):\n"
        "        self._session.config = config\n"
        "        setattr(self, 'broker', None)\n"
        "        reply.fault = None\n"
    )
    attributes = {"version", "heartbeat", "frames_received", "client_id", "config", "broker"}
    assert writes_of_session_attributes(source, attributes) == [
        "2: session.version",
        "4: s.heartbeat",
        "5: s.frames_received",
        "7: setattr(connection, 'client_id', 'x')",
        "13: self._session.config",
    ]
