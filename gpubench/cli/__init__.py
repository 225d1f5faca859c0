"""The command line (parser.py, commands.py, console.py) and the pytest plugin: nothing here
decides how a point is measured."""

from gpubench.cli.main import main

__all__ = ["main"]
