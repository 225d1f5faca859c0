"""The command line and the pytest plugin's face: parsing (parser.py), what each command runs
(commands.py), and what it prints (console.py, convergence_table.py). Nothing here decides how a
point is measured."""

from gpubench.cli.main import main

__all__ = ["main"]
