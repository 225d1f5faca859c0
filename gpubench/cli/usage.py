"""argparse as gpubench uses it: a usage error is one line naming the bad value and what is
allowed (a ConfigError, exit status 2), and each option's help ends with its default."""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from gpubench.config.errors import ConfigError


class Help(argparse.HelpFormatter):
    """Each option's help ends with its default: '(default: small)'. An option that takes no
    value, one whose help says its default already, and one with no default (None, or an
    empty list) are left as they are; the sweep's suite-set flags say '(default: the
    suite's)' in their own help."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "(default" in text
            or action.nargs == 0
            or default in (None, [], argparse.SUPPRESS)
            or not action.option_strings
        ):
            return action.help
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit status 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Help)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # argparse drops a value of "--" (`--size=--`) and hands the option an empty list,
        # unchecked by its type: check "--" by the option's own type, which names what is
        # allowed; an option that would take it (a path) still cannot have it.
        if action.option_strings and arg_strings == ["--"]:
            if action.type is not None:
                self._get_value(action, "--")  # raises, naming the allowed values
            raise ConfigError(
                f"argument {'/'.join(action.option_strings)}: invalid value '--'; allowed: "
                f"{action.metavar or 'a value'} other than '--' (which ends the options)"
            )
        return super()._get_values(action, arg_strings)

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """argparse's, with an unrecognised option named beside the options allowed."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}; {self._allowed(parsed)}")
        return parsed

    def _allowed(self, parsed: argparse.Namespace) -> str:
        """The options of the command given (of the whole parser where none was)."""
        command = getattr(parsed, "command", None)
        found = self
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and command in action.choices:
                found = action.choices[command]
        options = sorted(
            {s for a in found._actions for s in a.option_strings if s.startswith("--")}
        )
        return f"allowed: {', '.join(options)}"
