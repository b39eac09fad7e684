"""
``--config FILE``: the option that reads the configuration file
(:mod:`stompbroker.app.config_file`) before the command line, so that the
command line overrides what the file sets.

:func:`stompbroker.app.config_file.load` turns the file into settings; this
module applies them to :class:`stompbroker.app.options.Options`: each setting
parsed as the command line would parse it, the checks across options once the
command line is read too, and a refusal of a value the file gave said of the
file's line.
"""

from __future__ import annotations

import getopt
import re

from twisted.python import usage

from stompbroker.app.config_file import ConfigError, Setting, load

__all__ = ["ConfigFileOptions", "overridden"]

#: The command-line options that replace a repeatable option's values from the
#: file (rather than add to them); by default the option itself.
_REPLACED_BY = {"listen": ("listen", "port")}


def overridden(setting: Setting, given: set[str]) -> bool:
    """
    :param given: the options the command line gives (long names).
    :returns: whether the command line overrides ``setting``: it gives the same
        option (or, for ``listen``, ``--port``).
    """
    return any(name in given for name in _REPLACED_BY.get(setting.option, (setting.option,)))


class ConfigFileOptions(usage.Options):
    """
    ``--config FILE``: a mixin of :class:`stompbroker.app.options.Options` that
    reads the file's settings before the command line's, so that the command line
    overrides them.  A repeatable option given on the command line replaces the
    file's values of it (``--listen`` or ``--port`` replace ``listen``); a flag set
    in the file cannot be unset on the command line.
    """

    def opt_config(self, path: str) -> None:
        """A TOML configuration file holding any of these options (docs/configuration.md); the command line overrides it."""  # noqa: E501
        # Read before the command line by parseOptions; kept to say which file it was.
        self["config"] = path

    def parseOptions(self, options: list[str] | None = None) -> None:
        """
        Read ``--config``'s file, then the command line.

        :raises ConfigError: for a mistake in the file, with its line.
        :raises usage.UsageError: for one on the command line.
        """
        argv = list(options) if options is not None else []
        path, given = self._scan(argv)
        origins: dict[str, Setting] = {}
        if path is not None:
            for setting in load(path):
                if not overridden(setting, given):
                    self._apply(setting)
                    origins[setting.option] = setting
        try:
            super().parseOptions(options)
        except ConfigError:
            raise
        except usage.UsageError as error:
            # A later check (postOptions) may refuse a value the file gave.
            named = re.match(r"--([a-z0-9-]+)", str(error))
            culprit = origins.get(named.group(1)) if named else None
            if culprit is None:
                raise
            raise ConfigError(culprit.explain(str(error))) from None

    def _scan(self, argv: list[str]) -> tuple[str | None, set[str]]:
        """
        :returns: the ``--config`` file (or ``None``), and the long names of the
            options the command line gives; a command line getopt refuses gives
            none, and the parse that follows says why.
        :raises usage.UsageError: for ``--config`` given twice.
        """
        try:
            pairs, _ = getopt.getopt(argv, self.shortOpt, self.longOpt)
        except getopt.GetoptError:
            return None, set()
        given = set()
        paths = []
        for flag, value in pairs:
            name = flag.lstrip("-")
            name = self.synonyms.get(name, self.synonyms.get(name.replace("-", "_"), name))
            given.add(name.replace("_", "-"))
            if name == "config":
                paths.append(value)
        if len(paths) > 1:
            raise usage.UsageError("--config is given twice; one file holds the settings")
        return (paths[0] if paths else None), given

    def _apply(self, setting: Setting) -> None:
        """
        Parse one setting as the command line would, without the checks across
        options, which run once the command line is read too.

        :raises ConfigError: for a value the option refuses, with the file's line.
        """
        # postOptions checks the options together; shadowed on the instance meanwhile.
        self.postOptions = _nothing  # type: ignore[method-assign]
        try:
            usage.Options.parseOptions(self, setting.arguments())
        except usage.UsageError as error:
            raise ConfigError(setting.explain(str(error))) from None
        finally:
            del self.postOptions


def _nothing() -> None:
    """Stands for ``postOptions`` while the file's settings are parsed one by one."""
