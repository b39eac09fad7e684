"""
The package as pip installs it: the wheel carries the twistd plugins and the web
port's static files, and both an installed wheel and an editable install (``pip
install -e .``, what contributors run) put the plugins where twistd looks for them.

twistd finds ``stompbroker`` by scanning ``twisted.plugins.__path__``, which Twisted
builds from the entries of ``sys.path`` (``twisted.plugin.pluginPackagePaths``):
an installed wheel puts ``twisted/plugins/stompbroker_plugin.py`` in
``site-packages``; an editable install only works if it puts the checkout itself
on ``sys.path``, which is what ``package_dir`` in ``setup.cfg`` makes setuptools do
(README, "Contributing").

Each check runs in a fresh virtual environment that sees this interpreter's
packages (``--system-site-packages``), so nothing is downloaded but the build
backend when this interpreter lacks it; installs are ``--no-deps --no-index``.
The project is copied to a temporary directory first, so that building leaves
nothing in the checkout, and every child runs in an empty directory without
``PYTHONPATH``, so that the checkout cannot stand in for what was installed.
Since this interpreter may hold an installed stompbroker too, the checks ask
where Twisted looks, not only whether ``twistd --help`` names ``stompbroker``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.support.process import ROOT

pytestmark = pytest.mark.integration

PLUGINS = ("stompbroker_plugin.py", "stompbroker_auth.py", "stompbroker_reactors.py")
#: Longest any one step (a venv, an install, a build, a twistd run) may take.
STEP_TIMEOUT = 180

#: Run in a virtual environment: what Twisted's plugin scan sees there.
PROBE = """
import json, os, sys
import twisted.plugins
import stompbroker
print(json.dumps({
    "stompbroker": os.path.realpath(stompbroker.__file__),
    "plugin_dirs": [
        os.path.realpath(path)
        for path in twisted.plugins.__path__
        if os.path.exists(os.path.join(path, "stompbroker_plugin.py"))
    ],
}))
"""
#: Run in a virtual environment: ``twistd`` as its console script runs it.
TWISTD = "import sys; from twisted.scripts.twistd import run; sys.argv[0] = 'twistd'; run()"


def run(argv: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """
    Run a child in ``cwd`` without ``PYTHONPATH``, so that it imports only what is installed.

    :raises AssertionError: with its output, if ``check`` and it fails.
    """
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT
    )
    if check:
        assert done.returncode == 0, f"{argv} failed:\n{done.stdout}\n{done.stderr}"
    return done


def make_venv(path: Path) -> Path:
    """
    :returns: the interpreter of a new virtual environment at ``path`` that sees this
        interpreter's packages (pip and build among them) but not its ``bin``.
    """
    run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(path)], ROOT)
    return path / "bin" / "python"


def site_packages(python: Path) -> Path:
    """:returns: the virtual environment's own ``site-packages``."""
    done = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], ROOT)
    return Path(done.stdout.strip()).resolve()


def pip_install(python: Path, *arguments: str) -> None:
    """Install into the virtual environment of ``python``, whatever this interpreter holds."""
    pip = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed"]
    run([*pip, *arguments], ROOT)


def probe(python: Path, workdir: Path) -> tuple[Path, list[str]]:
    """
    :returns: the file ``stompbroker`` is imported from in the virtual environment, and
        the directories of ``twisted.plugins.__path__`` that hold its plugin.
    """
    seen = json.loads(run([str(python), "-c", PROBE], workdir).stdout)
    return Path(seen["stompbroker"]), list(seen["plugin_dirs"])


def twistd_commands(python: Path, workdir: Path) -> list[str]:
    """:returns: the commands ``twistd --help`` lists in the virtual environment."""
    output = run([str(python), "-c", TWISTD, "--help"], workdir).stdout
    commands = output.split("Commands:", 1)[1].splitlines()
    return [line.split()[0] for line in commands if line.startswith("    ") and line.split()]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project's files (tracked, or new and not ignored), to build from."""
    copy = tmp_path_factory.mktemp("project")
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], ROOT)
    for name in filter(None, listed.stdout.split("\0")):
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    return copy


@pytest.fixture(scope="module")
def builder(tmp_path_factory: pytest.TempPathFactory, project: Path) -> Path:
    """
    A virtual environment with the project's build requirements, which build without
    isolation in it; pip installs them only if this interpreter lacks them.
    """
    python = make_venv(tmp_path_factory.mktemp("builder") / "venv")
    requires = tomllib.loads((project / "pyproject.toml").read_text())["build-system"]["requires"]
    run([str(python), "-m", "pip", "install", "-q", *requires], ROOT)
    return python


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory, project: Path, builder: Path) -> Path:
    """The wheel ``python -m build`` makes of the project."""
    out = tmp_path_factory.mktemp("dist")
    build = [str(builder), "-m", "build", "--wheel", "--no-isolation"]
    run([*build, "--outdir", str(out), str(project)], out)
    (built,) = out.glob("stompbroker-*.whl")
    return built


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty directory for children to run in, far from the checkout."""
    empty = tmp_path / "empty"
    empty.mkdir()
    return empty


def test_wheel_carries_the_plugins_and_the_static_files(wheel: Path) -> None:
    """
    The wheel holds the three twistd plugins, py.typed, every static file of the web
    port and every Lua script of the redis engine, and no ``__init__.py`` in
    ``twisted/`` or ``twisted/plugins/``, which would replace Twisted's own package
    when installed.
    """
    names = set(zipfile.ZipFile(wheel).namelist())
    static = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "stompbroker" / "web" / "static").rglob("*")
        if path.is_file()
    }
    assert static, "no static files found in the checkout"
    scripts = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "stompbroker" / "broker" / "engine" / "redis" / "lua").rglob("*.lua")
    }
    assert scripts, "no Lua scripts found in the checkout"
    expected = {f"twisted/plugins/{plugin}" for plugin in PLUGINS} | static | scripts
    assert expected | {"stompbroker/py.typed"} <= names, sorted(expected - names)
    assert not {"twisted/__init__.py", "twisted/plugins/__init__.py"} & names


def test_installed_wheel_puts_the_plugin_where_twistd_looks(
    tmp_path: Path, wheel: Path, workdir: Path
) -> None:
    """An installed wheel's plugin lies in a directory Twisted scans, and twistd lists it."""
    python = make_venv(tmp_path / "venv")
    pip_install(python, "--no-index", str(wheel))
    installed = site_packages(python)
    package, plugin_dirs = probe(python, workdir)
    assert package.is_relative_to(installed)
    assert str(installed / "twisted" / "plugins") in plugin_dirs
    assert "stompbroker" in twistd_commands(python, workdir)
    # The redis engine's scripts are files of the package: the installed one reads them.
    loads = "from stompbroker.broker.engine.redis.scripts import load; print(load('settle').sha)"
    assert len(run([str(python), "-c", loads], workdir).stdout.strip()) == 40


def test_editable_install_puts_the_checkout_s_plugin_where_twistd_looks(
    project: Path, builder: Path, workdir: Path
) -> None:
    """
    ``pip install -e .`` makes the checkout's own ``twisted/plugins`` a directory Twisted
    scans (setuptools' finder-based editable installs would not), and twistd lists it.
    """
    pip_install(builder, "--no-index", "--no-build-isolation", "--editable", str(project))
    package, plugin_dirs = probe(builder, workdir)
    assert package.is_relative_to(project.resolve())
    assert str(project.resolve() / "twisted" / "plugins") in plugin_dirs
    assert "stompbroker" in twistd_commands(builder, workdir)
