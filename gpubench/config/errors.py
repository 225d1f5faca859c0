"""ConfigError: a user's mistake in a suite file or on the command line (exit status 2)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A user's mistake in a suite file or on the command line (exit status 2)."""


def keyed_error(key: str, message: str) -> ConfigError:
    err = ConfigError(message)
    err.key = key  # type: ignore[attr-defined]
    return err
