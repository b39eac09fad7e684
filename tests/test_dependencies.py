"""
What the package imports, against what ``pip install .`` installs.

A module the broker imports at run time (at the top of a file or inside a
function, as ``security/http_endpoint.py`` imports treq only when ``--auth
http:`` is used) must come with the package: from a distribution that
``install_requires`` names, or one of theirs (``twisted[tls]`` brings
pyOpenSSL), never only from the ``test`` extra, where the test environment would
hide its absence until a user's login failed.  The redis engine's modules may
use what the ``redis`` extra adds, which ``--engine redis://`` asks for by name
when it is missing; imports under ``TYPE_CHECKING`` are for the type checker
only.

This reads the metadata of the installed distributions, so it needs no network
and no new virtual environment; ``tests/test_packaging.py`` installs the wheel.
"""

from __future__ import annotations

import ast
import configparser
import re
import sys
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from pathlib import Path

import pytest

from tests.support.process import ROOT

PACKAGE = ROOT / "stompbroker"

#: Where a module may use an extra's distributions, and which extra that is.
EXTRA_USERS = {
    "redis": ("stompbroker/broker/engine/redis/", "stompbroker/app/engine_options.py"),
    # The stats schema as a Spark StructType, which only the Spark jobs ask for.
    "spark": ("stompbroker/stats/schema.py",),
}

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[([^\]]*)\])?")


def _requirement(text: str) -> tuple[str, list[str]] | None:
    """:returns: a requirement's name and extras; ``None`` where its marker leaves it out."""
    spec, _, marker = text.partition(";")
    marker = marker.strip()
    if marker and not _marker_holds(marker):
        return None
    found = _NAME.match(spec)
    assert found, f"cannot read the requirement {text!r}"
    extras = [extra.strip() for extra in (found.group(3) or "").split(",") if extra.strip()]
    return _normal(found.group(1)), extras


def _marker_holds(marker: str, extras: tuple[str, ...] = ("",)) -> bool:
    """Environment markers, read by the ``packaging`` library that setuptools brings."""
    from packaging.markers import Marker

    return any(Marker(marker).evaluate({"extra": extra}) for extra in extras)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(roots: list[str]) -> set[str]:
    """:returns: the distributions these requirement lines install, with their own, transitively."""
    seen: set[str] = set()
    todo = [parsed for line in roots if (parsed := _requirement(line))]
    while todo:
        name, extras = todo.pop()
        key = name + "[" + ",".join(sorted(extras)) + "]"
        if key in seen:
            continue
        seen.add(key)
        try:
            lines = requires(name) or []
        except PackageNotFoundError:
            continue
        for line in lines:
            spec, _, marker = line.partition(";")
            marker = marker.strip()
            if marker and not _marker_holds(marker, ("", *extras)):
                continue
            parsed = _requirement(spec)
            if parsed:
                todo.append(parsed)
    return {key.partition("[")[0] for key in seen}


def _setup_requirements() -> tuple[list[str], dict[str, list[str]]]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    install = [line for line in parser["options"]["install_requires"].splitlines() if line.strip()]
    extras = {
        name: [line for line in value.splitlines() if line.strip() and not line.startswith("#")]
        for name, value in parser["options.extras_require"].items()
    }
    return install, extras


def _runtime_imports(path: Path) -> Iterator[str]:
    """The top-level names ``path`` imports, leaving out what only ``TYPE_CHECKING`` sees."""
    tree = ast.parse(path.read_text(), str(path))
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def _third_party() -> dict[str, set[str]]:
    """:returns: each third-party top-level name the package imports, with the files that do."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in _runtime_imports(path):
            if name in sys.stdlib_module_names or name in {"stompbroker", "twisted"}:
                continue
            found.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    return found


def test_every_run_time_import_comes_with_the_package() -> None:
    install, extras = _setup_requirements()
    installed = _closure(install)
    providers = packages_distributions()
    missing = []
    for name, files in sorted(_third_party().items()):
        distributions = {_normal(dist) for dist in providers.get(name, [])}
        if not distributions:
            missing.append(f"{name} (imported by {sorted(files)}) is not installed at all")
            continue
        if distributions & installed:
            continue
        for file in sorted(files):
            allowed = installed | {
                dist
                for extra, users in EXTRA_USERS.items()
                if file.startswith(users)
                for dist in _closure(extras[extra])
            }
            if not distributions & allowed:
                missing.append(f"{name} ({sorted(distributions)}) imported by {file}")
    assert not missing, "imported but not installed by `pip install .`:\n" + "\n".join(missing)


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "lazy.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import pyspark\n"
        "def client():\n    from treq.client import HTTPClient\n    return HTTPClient\n"
    )
    assert list(_runtime_imports(module)) == ["typing", "treq"]


@pytest.mark.parametrize("extra", ["test", "spark"])
def test_an_extra_alone_is_not_what_the_check_counts(extra: str) -> None:
    install, extras = _setup_requirements()
    assert "pytest" not in _closure(install)
    assert _closure(extras[extra]) - _closure(install)
