"""A user's own code, named by import path ('package.module:function': a model or a loader), is
imported only where the user names it in this command: on the command line or in the suite
file they give. A run folder is data: what its suite.json, tune.json or rows name by import path
is never imported on their say-so (a shared folder naming `os:system` would run a command), and
a resume that needs such a name asks for it again.

The current folder is not on sys.path for gpubench's own imports (a `rich.py` there is not
imported in place of the library): it goes on the path, after the installed packages, only to
find an import path the user typed, and never under `python -P`.

Light to import: no torch."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from gpubench.config.errors import ConfigError

# The libraries' registered names: 'torchvision:resnet50' names a model in a library, not code.
LIBRARIES = ("torchvision", "timm", "hf")


def by_import_path(name: str | None) -> bool:
    """Whether `name` names code by import path ('package.module:function'), not a reference
    model or a library's registered model."""
    return name is not None and ":" in name and name.partition(":")[0] not in LIBRARIES


def import_paths(names: Iterable[str | None]) -> list[str]:
    """The names among `names` given by import path, each once, in order."""
    return list(dict.fromkeys(n for n in names if n is not None and by_import_path(n)))


def check_given(
    saved: Iterable[str | None], given: Iterable[str | None], where: str, how: str
) -> None:
    """Refuse (a ConfigError of one line) where the folder's `saved` names hold an import path
    the user did not give again in this command (`given`); `where` names the folder's file and
    `how` the flag that gives it."""
    missing = [n for n in import_paths(saved) if n not in set(import_paths(given))]
    if missing:
        named = ", ".join(repr(n) for n in missing)
        again = " ".join(f"{how} {n}" for n in missing)
        raise ConfigError(
            f"{where} names code by import path ({named}); a resume does not import what a "
            f"folder names: to run it, give it again ({again}) if you trust it"
        )


def find_typed(names: Iterable[str | None]) -> None:
    """Where the user typed an import path among `names`: the current folder goes on sys.path
    after the installed packages (as `python -m` would put it first, and the console script
    does not), so both find a user's module in the same places; not under `python -P`, which
    asks for no unsafe path. Workers started afterwards inherit sys.path (run.worker)."""
    here = os.getcwd()
    if import_paths(names) and not sys.flags.safe_path and here not in sys.path:
        sys.path.append(here)


def without_current_folder() -> None:
    """Take off sys.path the current folder that `python -m gpubench` puts first, so that no
    module of the folder a command runs in shadows an installed one; kept where it is the
    checkout gpubench itself runs from (not installed: its workers import it from there)."""
    here = os.getcwd()
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if (
        sys.path
        and sys.path[0] in ("", here)
        and os.path.realpath(here) != os.path.realpath(checkout)
    ):
        del sys.path[0]
